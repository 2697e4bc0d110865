"""A stopped heartbeat leaves no thread behind: a daemon thread still inside a TCPStore call at
interpreter exit is unwound through C++ and aborts the rank (SIGABRT) after a clean run."""

import socket
from datetime import timedelta

import torch.distributed as dist


def test_stop_joins_the_heartbeat_thread(monkeypatch):
    from posttrain.parallel import group

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = dist.TCPStore("127.0.0.1", port, is_master=True, timeout=timedelta(seconds=10))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setattr(group, "HEARTBEAT_S", 0.05)
    beat = group.Heartbeat(0, 2)
    assert beat._thread.is_alive()
    beat.stop()
    assert not beat._thread.is_alive()
    assert int(master.get("hb/0")) >= 0
