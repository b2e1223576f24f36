"""A stand-in for `python -m sglang.launch_server`, for the sidecar entrypoint tests: appends its arguments and
SGLANG_RETURN_ORIGINAL_LOGPROB to $FAKE_SGLANG_LOG as a JSON line, then answers GET /health with 200 on --host/--port
until SIGTERM. FAKE_SGLANG_EXIT=N (FAKE_SGLANG_EMBED_EXIT=N for an --is-embedding server) exits with N instead."""

from __future__ import annotations

import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    if sys.argv[1:3] != ["-m", "sglang.launch_server"]:
        sys.exit(f"fake sglang: unexpected command {sys.argv[1:]}")
    args = sys.argv[3:]
    with open(os.environ["FAKE_SGLANG_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"args": args, "logprob": os.environ.get("SGLANG_RETURN_ORIGINAL_LOGPROB")}) + "\n")
    code = os.environ.get("FAKE_SGLANG_EMBED_EXIT" if "--is-embedding" in args else "FAKE_SGLANG_EXIT")
    if code:
        sys.exit(int(code))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server = HTTPServer((args[args.index("--host") + 1], int(args[args.index("--port") + 1])), Health)
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
