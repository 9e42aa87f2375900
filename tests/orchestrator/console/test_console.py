"""The console in a real browser against a running `framefleet serve`: log in with a token,
submit a job through the page, watch it appear live, cancel it; a bad token is refused."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.support.console import log_in
from tests.support.jobs import job_dict
from tests.support.served_api import ServedApi


def test_a_bad_token_is_refused(page: Page, api: ServedApi) -> None:
    page.goto(api.base + "/console/login")
    page.get_by_label("API token").fill("ff_not_a_token")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("unknown, revoked")
    page.goto(api.base + "/console/fleet")
    expect(page).to_have_url(re.compile(r"/console/login$"))


def test_submit_and_cancel_through_the_page(page: Page, api: ServedApi, screenshots: Path) -> None:
    # The form starts from the newest job's spec (model, output, tags).
    api.call("POST", "/v1/jobs", "submitter", body=job_dict(f"seed-{uuid.uuid4().hex[:8]}"))
    log_in(page, api.base, api.tokens["console"])
    expect(page.locator("#live")).to_have_text(re.compile("^live"))
    job_id = f"page-{uuid.uuid4().hex[:8]}"
    page.get_by_text("Submit a job").click()
    page.get_by_label("Job id").fill(job_id)
    page.get_by_label("Prompt").fill("a lighthouse in a storm, <b>not bold</b>")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#submit-result")).to_have_text(f"Accepted: {job_id} is queued")
    row = page.locator(f"tr[data-job='{job_id}']")
    expect(row).to_contain_text("queued")  # the event stream refreshed the table
    assert api.store.get(job_id).spec.prompt == "a lighthouse in a storm, <b>not bold</b>"
    page.screenshot(path=screenshots / "queue.png", full_page=True)

    row.get_by_role("button", name="Cancel").click()
    expect(page.locator("#action-result")).to_have_text(f"Cancelled {job_id} (it stops now)")
    expect(row).to_contain_text("cancelled")
    page.locator(f"a[href='/console/jobs/{job_id}']").click()
    expect(page.get_by_role("heading", name=re.compile(job_id))).to_contain_text("cancelled")
    # Outside text is shown as text, never as markup.
    expect(page.get_by_text("<b>not bold</b>", exact=False)).to_be_visible()
    assert page.locator("dd b").count() == 0
