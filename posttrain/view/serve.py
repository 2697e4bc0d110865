"""Serve the viewer from a background thread (tests, benchmarks, notebooks).

    with serve_in_thread(create_app([run_dir])) as url:   # "http://127.0.0.1:PORT"
        ...

Binds loopback on a free port; leaving the block stops the server and joins the thread.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextmanager
def serve_in_thread(app: Any, host: str = "127.0.0.1", timeout_s: float = 20.0) -> Iterator[str]:
    import uvicorn

    port = free_port(host)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="posttrain-view", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the viewer did not start on {host}:{port} within {timeout_s} s")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout_s)
