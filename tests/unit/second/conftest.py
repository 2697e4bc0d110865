"""Fixtures for the second-model tests: a real `posttrain serve tiny` process and a server that fails."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def serve_tiny():
    """`posttrain serve tiny` as a subprocess on loopback; yields its /v1 base URL."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "posttrain", "serve", "tiny", "--port", str(port),
                             "--max-batch", "8", "--max-len", "256"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"posttrain serve did not start: {proc.stdout.read() if proc.stdout else ''}")
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


class _Failing(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802  every completion request fails as an overloaded server would
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        body = b'{"error": {"message": "overloaded", "type": "server_error"}}'
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture()
def failing_server():
    """An HTTP server on loopback whose every POST is a 503; yields (its /v1 URL, hit counter)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()
