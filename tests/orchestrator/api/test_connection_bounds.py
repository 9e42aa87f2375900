"""The API's connections are bounded as they arrive (issue 48): past the cap a new connection
is answered 503 and closed at once, not held; one address holds no more than its share; and a
request whose headers or body do not arrive in time is answered 408 and closed. At 072fb48
5,000 half-sent requests against a cap of 1,000 were all held open."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import boto3
import pytest

from tests.support.jobs import job_dict
from tests.support.local_services import REGION
from tests.support.served_api import ServedApi, serve_api
from tests.support.waits import wait_until

CAP, PER_ADDRESS = 12, 4


def served(
    moto_endpoint: str, folder: pytest.TempPathFactory, name: str, timeout: str
) -> Iterator[ServedApi]:
    yield from serve_api(
        moto_endpoint,
        folder.mktemp(name),
        extra_env={
            "FRAMEFLEET_API__MAX_CONNECTIONS": str(CAP),
            "FRAMEFLEET_API__MAX_CONNECTIONS_PER_ADDRESS": str(PER_ADDRESS),
            "FRAMEFLEET_API__HEADER_TIMEOUT_SECONDS": timeout,
            "FRAMEFLEET_API__BODY_TIMEOUT_SECONDS": timeout,
        },
    )


@pytest.fixture(scope="module")
def bounded(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    # Deadlines far off: the connections held must outlast a loaded machine's opening them.
    yield from served(moto_endpoint, tmp_path_factory, "bounded", "120")


@pytest.fixture(scope="module")
def impatient(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    yield from served(moto_endpoint, tmp_path_factory, "impatient", "1")


def half_sent(api: ServedApi, source: str, body: bool = False) -> socket.socket:
    host, port = api.base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
    if body:  # the headers whole (a token the app lets in to read the body), the body never
        token = api.tokens["submitter"].encode()
        head = b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token
        sock.sendall(head + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    else:  # and never the blank line
        sock.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n")
    return sock


def answer(sock: socket.socket) -> bytes:
    """What the server says before it closes the connection (a blocking read, 10 s at most)."""
    found = b""
    while chunk := sock.recv(4096):
        found += chunk
    return found


def test_past_the_cap_a_connection_is_answered_and_closed_at_once(
    bounded: ServedApi, moto_endpoint: str
) -> None:
    held: list[socket.socket] = []
    try:
        # From CAP addresses' worth of clients, each within its share.
        for n in range(CAP):
            held.append(half_sent(bounded, f"127.0.1.{n // PER_ADDRESS + 1}"))
        late = half_sent(bounded, "127.0.2.1")
        assert answer(late).startswith(b"HTTP/1.1 503")
        assert bounded.process.poll() is None
        # The API at its cap, the control plane's other loops go on: a job sent to the queue
        # is stored.
        sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_endpoint)
        sqs.send_message(QueueUrl=bounded.jobs_url, MessageBody=json.dumps(job_dict("at-cap")))
        wait_until(
            lambda: bounded.store.find("at-cap") is not None,
            timeout=60,
            what="the job stored through SQS while the API is full",
        )
    finally:
        for sock in held:
            sock.close()


def test_one_address_holds_no_more_than_its_share(bounded: ServedApi) -> None:
    held = [half_sent(bounded, "127.0.3.1") for _ in range(PER_ADDRESS)]
    try:
        assert answer(half_sent(bounded, "127.0.3.1")).startswith(b"HTTP/1.1 503")
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize("body", [False, True], ids=["headers", "body"])
def test_a_request_that_does_not_arrive_in_time_is_closed(impatient: ServedApi, body: bool) -> None:
    slow = half_sent(impatient, "127.0.4.1", body=body)
    assert answer(slow).startswith(b"HTTP/1.1 408")
    assert impatient.call("GET", "/v1/jobs", "reader").status == 200
