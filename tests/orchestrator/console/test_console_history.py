"""The console answers "what happened": the history over a date range (queue depth by state,
the fleet by market, its price per hour, interruptions and deadline misses, spend per day), the
money grouped every way finance asks with totals that match, GPU health with quarantines, the
dead letters with their reasons, and the queue a page at a time with each waiting job's reason.
Screenshots of each page go to FRAMEFLEET_SCREENSHOTS (docs/console for the README)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import boto3
from playwright.sync_api import Page, expect

from kernel.fleet_facts import GpuFault, GpuFaultKind, InstanceSeen, PriceSeen
from kernel.instance_state import InstanceState
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.market import Market
from tests.support.console import log_in
from tests.support.fleet_history import job_with_log
from tests.support.jobs import job_dict
from tests.support.local_services import REGION
from tests.support.served_api import ServedApi

G5 = "g5.xlarge"


def seed_a_day(api: ServedApi) -> None:
    """An hour of a small fleet: jobs through their states, a spot and an on-demand instance
    with prices, one interrupted, a GPU quarantined."""
    store, now = api.store, datetime.now(UTC)
    team = f"team-{uuid.uuid4().hex[:6]}"
    jobs = [job_dict(f"hist-{uuid.uuid4().hex[:8]}") | {"tags": {"team": team}} for _ in range(3)]
    store.intake.accept_batch(
        [Submission(parse_job(j, now=None), f"m-{j['job_id']}") for j in jobs]
    )
    first = store.get(jobs[0]["job_id"])
    store.transition(
        first.job_id, JobState.CANCELLED, expected_version=first.version, actor="t", reason="t"
    )
    spot, on_demand = "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"
    launched = now - timedelta(hours=1)
    store.cost_facts.record_instances_seen(
        [
            InstanceSeen(spot, "g5.xlarge", "us-east-1a", Market.SPOT, launched, 1, "a10g"),
            InstanceSeen(
                on_demand, "g5.xlarge", "us-east-1b", Market.ON_DEMAND, launched, 1, "a10g"
            ),
        ]
    )
    store.cost_facts.record_prices(
        [
            PriceSeen(G5, "us-east-1a", Market.SPOT, launched, Decimal("0.4123")),
            PriceSeen(G5, "us-east-1b", Market.ON_DEMAND, launched, Decimal("1.006")),
        ]
    )
    store.instance_records.move_instances(
        [spot], InstanceState.INTERRUPTED, "reclaimed by the spot market", "t"
    )
    store.cost_facts.record_instance_ended(spot, now - timedelta(minutes=10), "interrupted")
    for kind in (GpuFaultKind.ERRORS, GpuFaultKind.QUARANTINE):
        store.faults.record_gpu_fault(
            GpuFault(on_demand, on_demand, 0, kind, "Xid 79: GPU has fallen off the bus", now)
        )


def test_the_history_money_gpu_and_dead_letter_pages(
    page: Page, api: ServedApi, moto_endpoint: str, screenshots: Path
) -> None:
    seed_a_day(api)
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_endpoint)
    sqs.send_message(QueueUrl=api.jobs_url, MessageBody="{not json")
    log_in(page, api.base, api.tokens["admin"])

    page.get_by_role("link", name="History").click()
    expect(page.get_by_role("heading", name="What happened")).to_be_visible()
    for chart in ("queue-depth", "fleet-size", "usd-per-hour", "interruptions", "spend-per-day"):
        expect(page.locator(f"svg#{chart}")).to_be_visible()
    expect(page.locator("#jobs-at-end")).to_contain_text("cancelled")
    # The interrupted instance is one bar of the interruptions chart.
    expect(page.locator("svg#interruptions title", has_text="instances gone 1")).to_have_count(1)
    page.screenshot(path=screenshots / "history.png", full_page=True)
    # A date range outside everything shows nothing happened.
    page.get_by_label("From (UTC)").fill("2020-01-01T00:00")
    page.get_by_label("To (UTC)").fill("2020-01-02T00:00")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#spend-per-day-table")).to_contain_text("Nothing spent in this range")

    page.get_by_role("link", name="Money").click()
    expect(page.get_by_role("heading", name="Spend and savings")).to_be_visible()
    # A range that has ended, so the live instance adds nothing between two page loads.
    until = datetime.now(UTC).replace(second=0, microsecond=0)
    range_ = f"since={(until - timedelta(hours=2)):%Y-%m-%dT%H:%M}&until={until:%Y-%m-%dT%H:%M}"
    page.goto(f"{api.base}/console/costs?{range_}&group=team")
    spent = page.locator("#spent").inner_text()
    assert re.fullmatch(r"\$\d[\d,]*\.\d\d", spent)  # cents, never six decimals
    for group in ("team", "model", "pool", "market", "day"):
        page.get_by_label("Group by").select_option(group)
        page.get_by_role("button", name="Show").click()
        expect(page.locator("#grouped-total")).to_have_text(spent.removeprefix("$"))
        cells = page.locator("#grouped tbody td.num").all_inner_texts()
        assert sum(Decimal(c.replace(",", "")) for c in cells) == Decimal(
            spent.removeprefix("$").replace(",", "")
        )
    page.get_by_label("Group by").select_option("team")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#grouped")).to_contain_text("(fleet)")
    page.screenshot(path=screenshots / "money-by-team.png", full_page=True)

    page.get_by_role("link", name="GPU health").click()
    expect(page.locator("#quarantined")).to_contain_text("i-0aaaaaaaaaaaaaaa2")
    expect(page.locator("#faults")).to_contain_text("Xid 79")
    page.screenshot(path=screenshots / "gpus.png", full_page=True)

    page.get_by_role("link", name="Dead letters").click()
    for _ in range(30):  # the intake dead-letters the message within seconds
        if "invalid_json" in page.locator("#dead-letters").inner_text():
            break
        page.wait_for_timeout(1000)
        page.reload()
    expect(page.locator("#dead-letters")).to_contain_text("invalid_json")
    expect(page.locator("#dead-letters")).to_contain_text("{not json")
    page.screenshot(path=screenshots / "dead-letters.png", full_page=True)


def test_the_queue_a_page_at_a_time_filtered_by_state(page: Page, api: ServedApi) -> None:
    prefix = f"page-{uuid.uuid4().hex[:6]}"
    api.store.intake.accept_batch(
        [
            Submission(parse_job(job_dict(f"{prefix}-{i:02d}"), now=None), f"m-{prefix}-{i}")
            for i in range(60)
        ]
    )
    log_in(page, api.base, api.tokens["console"])
    expect(page.locator("tr[data-job]")).to_have_count(50)
    page.get_by_role("link", name="Older jobs →").click()
    expect(page.locator("tr[data-job]").first).to_be_visible()
    older = page.locator("tr[data-job]").count()
    assert 1 <= older <= 50
    page.locator("ul.counts").get_by_role("link", name=re.compile("queued")).click()
    expect(page).to_have_url(re.compile(r"state=queued"))
    states = page.locator("tr[data-job]").evaluate_all("rows => rows.map(r => r.dataset.state)")
    assert set(states) == {"queued"}
    # Filtered by a tag, as the API filters: only that team's jobs, in every state.
    team = f"team-{uuid.uuid4().hex[:6]}"
    tagged = [job_dict(f"{prefix}-t{i}") | {"tags": {"team": team}} for i in range(3)]
    api.store.intake.accept_batch(
        [Submission(parse_job(j, now=None), f"m-{j['job_id']}") for j in tagged]
    )
    page.get_by_label("Team").fill(team)
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("tr[data-job]")).to_have_count(3)
    page.locator("ul.counts").get_by_role("link", name="all").click()
    expect(page.locator("tr[data-job]")).to_have_count(3)


def test_a_jobs_page_shows_its_workers_lines_as_text(
    page: Page, api: ServedApi, moto_endpoint: str, screenshots: Path
) -> None:
    job_id = f"logged-{uuid.uuid4().hex[:8]}"
    lines = "INFO job started\nINFO <script>document.title='owned'</script> step 3 of 30\n"
    job_with_log(api.store, moto_endpoint, job_id, lines)
    log_in(page, api.base, api.tokens["console"])
    page.goto(f"{api.base}/console/jobs/{job_id}")
    expect(page.locator("#log-1")).to_contain_text("<script>document.title='owned'</script>")
    assert page.title() != "owned"
    page.screenshot(path=screenshots / "job-log.png", full_page=True)
