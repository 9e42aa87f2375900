"""Submit a job, wait for its video, download it: the producers' client, nothing else.

    pip install ./client            # framefleet-client: the standard library only
    FRAMEFLEET_URL=https://framefleet.example.com FRAMEFLEET_TOKEN=ff_... \
        python examples/producer/submit_and_wait.py examples/producer/job.json video.mp4

Against `framefleet demo --keep`: the URL it prints for the console, the token in
.demo/console-token, and examples/producer/demo-job.json (the demo's model and bucket)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from framefleet_client import Client, ClientError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", type=Path, help="the job's JSON")
    parser.add_argument("video", type=Path, help="where the MP4 goes")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait")
    args = parser.parse_args()
    client = Client(os.environ["FRAMEFLEET_URL"], os.environ["FRAMEFLEET_TOKEN"])
    job = json.loads(args.job.read_text())
    started = time.monotonic()
    try:
        submitted = client.submit(job)
        print(f"{submitted.job_id}: {submitted.state}")
        done = client.wait(submitted.job_id, timeout=args.timeout)
        print(f"{done.job_id}: {done.state} after {time.monotonic() - started:.0f} s")
        if not done.succeeded:
            return 1
        print(f"video: {client.download(done.job_id, args.video)}")
    except ClientError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
