"""Stand-ins for the sidecar entrypoint tests. As `python -m sglang.launch_server ARGS`: appends its arguments and
SGLANG_RETURN_ORIGINAL_LOGPROB to $FAKE_SGLANG_LOG as a JSON line ({"args", "logprob"}), then answers GET /health
with 200 on --host/--port until SIGTERM; FAKE_SGLANG_EXIT=N exits with N instead. As `serve ARGS` (the encoder,
`burnqed serve --encode-only`): logs {"encoder": ARGS}, answers /health with 503 for FAKE_ENCODER_WARMUP_S
seconds, then 200; FAKE_ENCODER_EXIT=N exits with N instead.

--sampling-defaults is checked as SGLang's argparse checks it (choices openai and model, SGLang's abbreviations
included: exit 2 with argparse's message otherwise).

More lenient than SGLang, and why: it accepts any other launch_server arguments (test_sglang_entrypoint checks what
the entrypoint passes, from the log), the port answers /health at once (SGLang's port is closed while it loads and
/health answers 503 until warm: only the encoder's warm-up is played), and nothing but /health is served (these
tests are about the sidecar's process handling, not the API, which tests/doubles/fault_server.py plays).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

READY_AT = [0.0]  # when /health turns 200 (monotonic clock)


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = 404 if self.path != "/health" else (200 if time.monotonic() >= READY_AT[0] else 503)
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    encoder = sys.argv[1:2] == ["serve"]
    if not encoder and sys.argv[1:3] != ["-m", "sglang.launch_server"]:
        sys.exit(f"fake sglang: unexpected command {sys.argv[1:]}")
    args = sys.argv[1:] if encoder else sys.argv[3:]
    if not encoder:  # SGLang's own parser: --sampling-defaults takes two choices (srt/arg_groups/fields/serving.py)
        parser = argparse.ArgumentParser(prog="sglang serve")
        parser.add_argument("--sampling-defaults", choices=["openai", "model"], default="model")
        parser.add_argument("--sampling-backend")  # what makes "--sampling-" ambiguous in SGLang's parser
        parser.parse_known_args(args)
    logprob = os.environ.get("SGLANG_RETURN_ORIGINAL_LOGPROB")
    entry = {"encoder": args} if encoder else {"args": args, "logprob": logprob}
    with open(os.environ["FAKE_SGLANG_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")
    code = os.environ.get("FAKE_ENCODER_EXIT" if encoder else "FAKE_SGLANG_EXIT")
    if code:
        sys.exit(int(code))
    if encoder:
        READY_AT[0] = time.monotonic() + float(os.environ.get("FAKE_ENCODER_WARMUP_S", "0"))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server = HTTPServer((args[args.index("--host") + 1], int(args[args.index("--port") + 1])), Health)
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
