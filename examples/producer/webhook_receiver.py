"""A webhook that receives FrameFleet's completion notices: it checks each one's signature,
answers 204 at once (the work goes elsewhere), and skips a notice it has seen (delivery is at
least once). The standard library and the producers' client only.

    FRAMEFLEET_WEBHOOK_SECRET=... python examples/producer/webhook_receiver.py 8081

Put it behind https (a load balancer, a reverse proxy): FrameFleet calls https URLs only."""

from __future__ import annotations

import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from framefleet_client.notices import BadSignature, verify

SECRET = os.environ.get("FRAMEFLEET_WEBHOOK_SECRET", "")
SEEN: set[str] = set()  # a real receiver keeps these in its database
MAX_BODY = 64 * 1024


class Notices(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.send_response(413)
            self.end_headers()
            return
        body = self.rfile.read(length)
        try:
            notice = verify(SECRET, body, dict(self.headers.items()))
        except BadSignature as error:
            self.send_response(401)
            self.end_headers()
            self.wfile.write(str(error).encode())
            return
        if notice["notice_id"] not in SEEN:
            SEEN.add(notice["notice_id"])
            print(f"{notice['kind']}: {notice['job_id']} ({notice['state']})", flush=True)
        self.send_response(204)
        self.end_headers()


if __name__ == "__main__":
    if not SECRET:
        sys.exit("set FRAMEFLEET_WEBHOOK_SECRET")
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8081
    ThreadingHTTPServer(("127.0.0.1", port), Notices).serve_forever()
