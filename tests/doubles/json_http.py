"""A JSON HTTP server in a thread on 127.0.0.1: the transport shared by the fake Kubernetes API server, the fake
Argo Server and the recording Argo double (tests/doubles/fake_kube.py, tests/cluster/conftest.py).

    with serve_json(lambda method, path, headers, body: (200, {"ok": True})) as url:
        httpx.get(url + "/anything").json()            # {"ok": True}

`answer(method, path, headers, body)` gives the status and the JSON body of the reply; methods not in `methods`
get the standard library's 501.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str, str, dict[str, str], bytes], tuple[int, Any]]


@contextmanager
def serve_json(answer: Answer, methods: tuple[str, ...] = ("GET", "POST")) -> Iterator[str]:
    """Serve `answer` until the block ends; yields the base URL (`http://127.0.0.1:PORT`)."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            code, body = answer(self.command, self.path, dict(self.headers.items()), raw)
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    for method in methods:
        setattr(Handler, f"do_{method}", Handler._reply)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
