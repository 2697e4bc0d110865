"""The host's end of the zygote's wire format: !II (json length, payload length), json,
payload; file descriptors ride on the header (SCM_RIGHTS). The agent's end is
agent/execution.py (recv_msg, send_msg).

Reading never starts a task: a warm execution reads several messages, and each task and
`wait_for` costs the host event-loop iterations (CPU per execution)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
from typing import Sequence

HDR = struct.Struct("!II")


def _wake(fut: asyncio.Future, exc: BaseException | None = None) -> None:
    if not fut.done():
        fut.set_result(None) if exc is None else fut.set_exception(exc)


async def _readable(loop, sock: socket.socket, timeout_s: float) -> None:
    """Until `sock` is readable; asyncio.TimeoutError after `timeout_s`. One future and one
    timer: no task per wait (this runs several times per execution)."""
    fd = sock.fileno()  # the socket may be closed (fileno -1) by the time we get here
    if fd < 0:  # closed under us (the slot was recycled): the same answer as a peer that hung up
        raise EOFError("the sandbox's socket is closed")
    fut = loop.create_future()
    loop.add_reader(fd, _wake, fut)
    timer = loop.call_later(timeout_s, _wake, fut, asyncio.TimeoutError())
    try:
        await fut
    finally:
        timer.cancel()
        loop.remove_reader(fd)


class Framed:
    """Framed messages (!II header, json, payload; fds on the header) from a non-blocking
    socket: what it holds is read without waiting (`fill`, then `next`), or awaited (`get`)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.fds: list[int] = []  # received, not yet claimed by a message, oldest first
        self.eof = False

    def next(self) -> tuple[dict, bytes] | None:
        """The next complete message already buffered, else None."""
        if len(self.buf) < HDR.size:
            return None
        jlen, plen = HDR.unpack_from(self.buf)
        end = HDR.size + jlen + plen
        if len(self.buf) < end:
            return None
        msg = json.loads(bytes(self.buf[HDR.size : HDR.size + jlen]))
        payload = bytes(self.buf[HDR.size + jlen : end])
        del self.buf[:end]
        return msg, payload

    def fill(self) -> bool:
        """Read what the socket holds now (up to its end: `eof`); False when nothing was there."""
        if self.sock.fileno() < 0:  # closed under us (the slot was recycled): as a peer that hung up
            self.eof = True
            return True
        got_any = False
        while not self.eof:
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.sock, 1 << 16, 16, socket.MSG_CMSG_CLOEXEC)
            except BlockingIOError:
                break
            self.fds.extend(fds)
            self.eof = not data
            self.buf += data
            got_any = True
        return got_any

    async def get(self, loop, timeout_s: float) -> tuple[dict, bytes]:
        deadline = loop.time() + timeout_s
        while True:
            got = self.next()
            if got is not None:
                return got
            if self.eof:
                raise EOFError("the sandbox closed its socket")
            if not self.fill():
                await _readable(loop, self.sock, max(0.0, deadline - loop.time()))

    def close_fds(self) -> None:
        for f in self.fds:
            os.close(f)
        self.fds.clear()


def send_msg(sock: socket.socket, obj: dict, payload: bytes = b"", fds: Sequence[int] = ()) -> None:
    blob = json.dumps(obj).encode()
    head = HDR.pack(len(blob), len(payload)) + blob
    sock.setblocking(True)
    try:
        socket.send_fds(sock, [head], list(fds)) if fds else sock.sendall(head)
        if payload:
            sock.sendall(payload)
    finally:
        sock.setblocking(False)
