"""Records every AWS API call the code makes while the tests run, with the process role it
belongs to, so `tests/support/iam_check.py` can hold each IAM policy in infra/ to what the
code calls.

The role is read off the call stack: the innermost frame in the product's own packages decides
(orchestrator: the control plane, autoscaler: the autoscaler, worker_ami: the worker; the face's
composition roots by file). Calls made only by the tests, the demo's stand-ins for AWS and
Terraform (creating queues and buckets, replaying spot interruptions) are `setup` and ignored.
A process with no product frame (the workers' user data) names its role in FRAMEFLEET_AWS_ROLE.

Recording wraps botocore's and aiobotocore's `_make_api_call`: it watches, it never answers.
Each process appends one JSON line per new (role, service, operation, place) to the file named
by FRAMEFLEET_AWS_ACTIONS_LOG; subprocesses load it through tests/aws_record/sitecustomize.py."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]
LOG_ENV = "FRAMEFLEET_AWS_ACTIONS_LOG"
ROLE_ENV = "FRAMEFLEET_AWS_ROLE"
PLACE_ENV = "FRAMEFLEET_AWS_PLACE"
PACKAGES = {"orchestrator": "control-plane", "autoscaler": "autoscaler", "worker_ami": "worker"}
FACE = {
    "control_plane.py": "control-plane",
    "costs_cli.py": "control-plane",
    "cli.py": "control-plane",
    "autoscaler_cli.py": "autoscaler",
    "worker_cli.py": "worker",
    "worker_process.py": "worker",
}
CALL = "_make_api_call"
USER_AGENT_PREFIX = "framefleet/"
_seen: set[tuple[str, str, str, str]] = set()
_lock = threading.Lock()


def role_and_place(client: Any = None) -> tuple[str, str]:
    frame = sys._getframe(2)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path.name == "aws_actions.py":
            frame = frame.f_back  # type: ignore[assignment]
            continue
        try:
            relative = path.resolve().relative_to(ROOT)
        except ValueError:
            frame = frame.f_back  # type: ignore[assignment]
            continue
        top = relative.parts[0]
        place = f"{relative}:{frame.f_code.co_name}"
        if relative == Path("orchestrator/client.py"):
            return "producer", place
        if top in PACKAGES:
            return PACKAGES[top], place
        if top == "framefleet":
            return FACE.get(relative.name, "setup"), place
        if top in ("tests", "benchmarks"):
            return "setup", place
        frame = frame.f_back  # type: ignore[assignment]
    # A call from a thread of boto3's transfer manager has no product frame: the client's user
    # agent names the role that made it (`framefleet/<role>`).
    agent = str(
        getattr(getattr(getattr(client, "meta", None), "config", None), "user_agent_extra", "")
    )
    for word in agent.split():
        if word.startswith(USER_AGENT_PREFIX):
            return word.removeprefix(USER_AGENT_PREFIX), f"(a transfer thread of {word})"
    return os.environ.get(ROLE_ENV, "unknown"), os.environ.get(PLACE_ENV, "(no product frame)")


def record(client: Any, operation: str) -> None:
    log = os.environ.get(LOG_ENV)
    if not log:
        return
    role, place = role_and_place(client)
    service = client.meta.service_model.signing_name
    key = (role, service, operation, place)
    with _lock:
        if key in _seen:
            return
        _seen.add(key)
        with open(log, "a", encoding="utf-8") as out:
            out.write(
                json.dumps(dict(zip(("role", "service", "operation", "place"), key, strict=True)))
                + "\n"
            )


def install() -> None:
    """Idempotent; a no-op unless FRAMEFLEET_AWS_ACTIONS_LOG is set."""
    if not os.environ.get(LOG_ENV):
        return
    import botocore.client

    if getattr(botocore.client.BaseClient, "_framefleet_recorded", False):
        return
    # The stubs do not declare the private method; it is botocore's one door to every call.
    sync_call = getattr(botocore.client.BaseClient, CALL)

    def recorded_sync(self: Any, operation_name: str, api_params: Any) -> Any:
        record(self, operation_name)
        return sync_call(self, operation_name, api_params)

    setattr(botocore.client.BaseClient, CALL, recorded_sync)
    setattr(botocore.client.BaseClient, "_framefleet_recorded", True)  # noqa: B010
    try:
        import aiobotocore.client
    except ImportError:
        return
    async_call = getattr(aiobotocore.client.AioBaseClient, CALL)

    async def recorded_async(self: Any, operation_name: str, api_params: Any) -> Any:
        record(self, operation_name)
        return await async_call(self, operation_name, api_params)

    setattr(aiobotocore.client.AioBaseClient, CALL, recorded_async)
