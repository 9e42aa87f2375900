"""The console over the whole demo system (`framefleet demo --keep`): log in with the demo's
token, submit a job through the page and watch it succeed on a worker the autoscaler bought,
cancel another, and take the README's screenshots of every page."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3
from playwright.sync_api import Page, expect

from framefleet.local_ports import free_port
from tests.support.console import log_in
from tests.support.paths import ROOT
from tests.support.waits import wait_until

RENDER_SECONDS = 240  # a boot, a model load and a tiny render on a CPU shared with the suite


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(the console's base URL, its token) of a demo left running after its one job."""
    port = free_port()
    log = (tmp_path / "demo.out").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "framefleet",
            "demo",
            "--jobs",
            "1",
            "--seed",
            "5",
            "--keep",
            "--api-port",
            str(port),
            "--timeout",
            "300",
        ],
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "160", "PYTHONPATH": str(ROOT)},
    )
    token_file = tmp_path / ".demo" / "console-token"
    base = f"http://127.0.0.1:{port}"

    def has_a_job() -> bool:
        assert process.poll() is None, (tmp_path / "demo.out").read_text()[-3000:]
        if not token_file.exists():
            return False
        token = token_file.read_text().strip()
        try:
            reply = urllib3.request(
                "GET", base + "/v1/jobs", headers={"Authorization": f"Bearer {token}"}, timeout=5
            )
        except urllib3.exceptions.HTTPError:
            return False
        return reply.status == 200 and bool(reply.json()["jobs"])

    try:
        # The producer's first job seeds the submit form with the demo's model and bucket.
        wait_until(has_a_job, timeout=120, what="the demo's API with its first job")
        yield base, token_file.read_text().strip()
    finally:
        process.send_signal(signal.SIGINT)  # the demo stops its processes on Ctrl-C
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.mark.end_to_end
def test_the_console_drives_the_demo(page: Page, demo: tuple[str, str], screenshots: Path) -> None:
    base, token = demo
    log_in(page, base, token)
    page.get_by_text("Submit a job").click()
    page.get_by_label("Job id").fill("console-render")
    page.get_by_label("Prompt").fill("a paper boat on a rainy street, submitted in the console")
    page.get_by_label("Steps").fill("4")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#submit-result")).to_have_text("Accepted: console-render is queued")

    page.get_by_label("Job id").fill("console-cancel")
    page.get_by_label("Priority").fill("0")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#submit-result")).to_have_text("Accepted: console-cancel is queued")
    row = page.locator("tr[data-job='console-cancel']")
    row.get_by_role("button", name="Cancel").click()
    expect(row).to_contain_text("cancelled")

    page.locator("a[href='/console/jobs/console-render']").click()
    heading = page.get_by_role("heading", name=re.compile("console-render"))
    expect(heading).to_contain_text("succeeded", timeout=RENDER_SECONDS * 1000)
    expect(page.get_by_role("button", name="Get the video link")).to_be_visible()
    expect(page.locator("ol.timeline")).to_contain_text("running")
    expect(page.get_by_text("total (waste")).to_be_visible()  # its cost, from the ledger
    page.screenshot(path=screenshots / "job.png", full_page=True)

    for path, name, heading_text in (
        ("/console", "queue", "Queue"),
        ("/console/fleet", "fleet", "Fleet"),
        ("/console/costs", "costs", "Spend and savings"),
    ):
        page.goto(base + path)
        expect(page.get_by_role("heading", name=heading_text, exact=True)).to_be_visible()
        if name == "fleet":
            expect(page.locator(".headline")).to_contain_text("per hour for")
        page.screenshot(path=screenshots / f"{name}.png", full_page=True)
