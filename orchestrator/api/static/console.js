// The console's few behaviours: live refresh from the event stream, submit, cancel, video link.
// Everything it shows comes from the server's escaped HTML or is set as text, never as markup.
"use strict";

const HEADERS = { "Content-Type": "application/json", "X-FrameFleet-Console": "1" };
let refreshTimer = null;

function say(id, text, ok) {
  const box = document.getElementById(id);
  if (!box) return;
  box.textContent = text;
  box.className = ok ? "ok" : "error";
}

function problemText(body) {
  const lines = [body.detail || "refused"];
  for (const error of body.errors || []) lines.push(error);
  return lines.join("\n");
}

async function refresh() {
  refreshTimer = null;
  const answer = await fetch(location.href, { credentials: "same-origin" });
  if (!answer.ok) return;
  const page = new DOMParser().parseFromString(await answer.text(), "text/html");
  const fresh = page.getElementById("main");
  const main = document.getElementById("main");
  if (!fresh || !main) return;
  // Keep what the user is typing: the submit card is left as it is.
  const card = document.getElementById("submit-card");
  const kept = ["action-result", "submit-result"].map((id) => document.getElementById(id));
  main.replaceChildren(...fresh.childNodes);
  const newCard = document.getElementById("submit-card");
  if (card && newCard) newCard.replaceWith(card);
  for (const box of kept) {
    const slot = box && document.getElementById(box.id);
    if (slot) slot.replaceWith(box);
  }
}

function soon() {
  if (refreshTimer === null) refreshTimer = setTimeout(refresh, 700);
}

function live() {
  if (!document.querySelector("main[data-live]")) return;
  const status = document.getElementById("live");
  const stream = new EventSource("/v1/events");
  stream.onopen = () => { if (status) status.textContent = "live"; };
  stream.onerror = () => { if (status) status.textContent = "reconnecting…"; };
  for (const kind of ["job", "launch", "interruption", "ended"]) {
    stream.addEventListener(kind, () => {
      if (status) status.textContent = "live, updated " + new Date().toLocaleTimeString();
      soon();
    });
  }
}

async function submitJob(form) {
  const job = JSON.parse(form.dataset.template || "{}");
  for (const field of form.elements) {
    if (!field.name || field.value === "") continue;
    if (field.type === "number") job[field.name] = Number(field.value);
    else if (field.name === "deadline") job.deadline = new Date(field.value + "Z").toISOString();
    else job[field.name] = field.value;
  }
  const answer = await fetch("/v1/jobs", {
    method: "POST", credentials: "same-origin", headers: HEADERS, body: JSON.stringify(job),
  });
  const body = await answer.json();
  if (answer.status === 201) say("submit-result", "Accepted: " + body.job_id + " is " + body.state, true);
  else if (answer.status === 200) say("submit-result", "Already accepted: " + body.job_id, true);
  else say("submit-result", problemText(body), false);
  soon();
}

async function cancelJob(jobId) {
  const answer = await fetch("/v1/jobs/" + encodeURIComponent(jobId) + "/cancel", {
    method: "POST", credentials: "same-origin", headers: HEADERS,
    body: JSON.stringify({ reason: "cancelled in the console" }),
  });
  const body = await answer.json();
  if (answer.ok) say("action-result", "Cancelled " + jobId + " (it stops " + body.stops + ")", true);
  else say("action-result", problemText(body), false);
  soon();
}

async function videoLink(jobId) {
  const answer = await fetch("/v1/jobs/" + encodeURIComponent(jobId) + "/output", {
    credentials: "same-origin",
  });
  const body = await answer.json();
  if (answer.ok) window.open(body.url, "_blank", "noopener");
  else say("action-result", problemText(body), false);
}

document.addEventListener("submit", (event) => {
  if (event.target.id === "submit-job") {
    event.preventDefault();
    submitJob(event.target);
  }
});
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-cancel], button[data-output]");
  if (!button) return;
  if (button.dataset.cancel) cancelJob(button.dataset.cancel);
  else videoLink(button.dataset.output);
});
function prefill() {
  // The submit form starts from the newest job's spec; the user changes what they need.
  const form = document.getElementById("submit-job");
  if (!form) return;
  const template = JSON.parse(form.dataset.template || "{}");
  for (const field of form.elements) {
    if (field.name && field.value === "" && template[field.name] !== undefined) {
      field.value = template[field.name];
    }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  prefill();
  live();
});
