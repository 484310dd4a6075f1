"""A stand-in for ``llama-server`` on 127.0.0.1: its command line, ``/health`` and slot API.

What the evaluation's :func:`~tool_failure_guard.evaluation.server.local_server`
needs of the real one (which cannot be built in a test): ``--version``, the
``--port`` it listens on, ``GET /health``, and ``POST /slots/<id>?action=erase``,
which llama-server answers only when started with ``--slot-save-path`` (an
existing directory; without it, 501 "This server does not support slots
action"), with ``{"id_slot", "n_erased"}``.  It writes the command line it was
given to ``<slot dir or cwd>/argv.json`` so a test can read it.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path


def main(argv: list[str]) -> int:
    if "--version" in argv:
        print("version: 1 (fake)", file=sys.stderr)
        return 0
    port = int(argv[argv.index("--port") + 1])
    slots = argv[argv.index("--slot-save-path") + 1] if "--slot-save-path" in argv else None
    if slots is not None and not Path(slots).is_dir():
        print(f"error: not a directory: {slots}", file=sys.stderr)
        return 1
    (Path(slots) if slots else Path.cwd()).joinpath("argv.json").write_text(json.dumps(argv))

    class Handler(BaseHTTPRequestHandler):
        def _json(self, status: int, body: object) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._json(200, {"status": "ok"})
            else:
                self._json(404, {"error": {"message": "File Not Found"}})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.startswith("/slots/"):
                self._json(404, {"error": {"message": "File Not Found"}})
            elif slots is None:
                message = (
                    "This server does not support slots action. Start it with `--slot-save-path`"
                )
                self._json(501, {"error": {"code": 501, "message": message}})
            elif self.path == "/slots/0?action=erase":
                self._json(200, {"id_slot": 0, "n_erased": 0})
            else:
                self._json(400, {"error": {"code": 400, "message": "Invalid slot ID"}})

        def log_message(self, format: str, *args: object) -> None:
            return None

    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
