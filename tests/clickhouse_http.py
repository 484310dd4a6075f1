"""A 127.0.0.1 HTTP server speaking ClickHouse's HTTP interface, backed by chdb.

``clickhouse-connect`` talks to it exactly as to a server: the query arrives
as the request body (or the ``query`` parameter) with its ``FORMAT Native``
clause, the answer is chdb's output in that format, and an error is a 500 with
``X-ClickHouse-Exception-Code`` and the message as the body.  Not emulated:
authentication, TLS, compression, URL-parameter settings, sessions and
progress headers (see docs/rollout.md, "What is tested where").
"""

from __future__ import annotations

import http.server
import re
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_FORMAT = re.compile(r"\bFORMAT\s+(\w+)\s*$", re.IGNORECASE)


@contextmanager
def serve(session: Any) -> Iterator[str]:
    """Serve ``session`` (a chdb session) on 127.0.0.1; yields the server's URL."""
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def _answer(self, body: bytes) -> None:
            params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            text = params.get("query", "") + body.decode("utf-8")
            match = _FORMAT.search(text.strip())
            fmt = match.group(1) if match else "TabSeparated"
            try:
                with lock:
                    data = session.query(text, fmt).bytes()
            except Exception as error:
                message = f"Code: 60. DB::Exception: {error}".encode()
                self.send_response(500)
                self.send_header("X-ClickHouse-Exception-Code", "60")
                self.send_header("Content-Length", str(len(message)))
                self.end_headers()
                self.wfile.write(message)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("X-ClickHouse-Timezone", "UTC")
            self.send_header("X-ClickHouse-Summary", '{"read_rows":"0"}')
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer(b"")

        def do_POST(self) -> None:
            self._answer(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
