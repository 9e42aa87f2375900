"""The producer's client over the HTTP API:

    from framefleet_client import Client
    client = Client("https://framefleet.example.com", token)
    client.submit({"schema": "framefleet.job/v1", "job_id": "shot-001", ...})
    job = client.wait("shot-001", timeout=3600)
    if job.succeeded:
        client.download("shot-001", "shot-001.mp4")

Submitting is idempotent by `job_id`: sending the same job again is safe. Jobs sent through
SQS instead (many at once, `framefleet_client.sqs`) are followed the same way.
"""

from __future__ import annotations

import shutil
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from framefleet_client.errors import ClientError, Unreachable, WaitTimedOut
from framefleet_client.jobs import ENDED, Job
from framefleet_client.transport import KEEPALIVE, Event, Transport

_JOB_ID = "job_id"


class Client:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.http = Transport(url, token, timeout)
        self._monotonic = monotonic

    def submit(self, job: Mapping[str, Any]) -> Job:
        """Send one job; the job as stored (a resend of the same spec returns it again)."""
        return Job.from_answer(self.http.request("POST", "/v1/jobs", dict(job)))

    def get(self, job_id: str) -> Job:
        return Job.from_answer(self.http.request("GET", f"/v1/jobs/{_quoted(job_id)}"))

    def detail(self, job_id: str) -> dict[str, Any]:
        """Everything the API says of the job: attempts, history, progress, cost."""
        answer: dict[str, Any] = self.http.request("GET", f"/v1/jobs/{_quoted(job_id)}")
        return answer

    def cancel(self, job_id: str, reason: str = "by the producer") -> Job:
        answer = self.http.request("POST", f"/v1/jobs/{_quoted(job_id)}/cancel", {"reason": reason})
        return Job.from_answer(answer["job"])

    def events(self, after: int | None = None) -> Iterator[Event]:
        """Every job move the token's teams may see (and the fleet's launches and ends),
        from after event `after` (None: from now), for as long as the caller reads."""
        with self.http.events(after) as stream:
            yield from (event for event in stream if event is not KEEPALIVE)

    def wait(self, job_id: str, timeout: float) -> Job:
        """The job once it ended (succeeded, failed or cancelled), following the event stream
        (reconnecting where it left off when it breaks); WaitTimedOut after `timeout` s."""
        deadline = self._monotonic() + timeout
        after: int | None = None
        while True:
            left = deadline - self._monotonic()
            if left <= 0:
                raise WaitTimedOut(f"job {job_id!r} had not ended after {timeout:g} s")
            try:
                # The stream is open before the job is read: a move between the two is in it.
                with self.http.events(after, timeout=min(left, 30.0)) as stream:
                    job = self.get(job_id)
                    if job.ended:
                        return job
                    for event in stream:
                        if event.id is not None:
                            after = int(event.id)
                        data = event.data
                        if data.get(_JOB_ID) == job_id and data.get("to_state") in ENDED:
                            return self.get(job_id)
                        if self._monotonic() >= deadline:
                            break
            except (Unreachable, TimeoutError):
                continue  # a read that timed out or a dropped stream: look again

    def download(self, job_id: str, path: str | Path) -> Path:
        """Fetch the finished video to `path` through its presigned link."""
        link = str(self.http.request("GET", f"/v1/jobs/{_quoted(job_id)}/output")["url"])
        if urllib.parse.urlsplit(link).scheme not in ("http", "https"):
            raise ClientError(f"the API's link for {job_id!r} is not http(s)")
        target = Path(path)
        try:
            # No token goes with it: the link is presigned.
            fetch = urllib.request.Request(link)  # noqa: S310 - http(s), checked above
            with (
                urllib.request.urlopen(fetch, timeout=self.http.timeout) as answer,  # noqa: S310
                target.open("wb") as out,
            ):
                shutil.copyfileobj(answer, out)
        except OSError as error:
            raise ClientError(f"could not download {job_id!r}: {error}") from None
        return target


def _quoted(job_id: str) -> str:
    return urllib.parse.quote(job_id, safe="")
