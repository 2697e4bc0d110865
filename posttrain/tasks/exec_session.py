"""`ExecSession`: a file-carrying shell session built on `Sandbox.exec` alone.

Used by the soundness driver when the sandbox offers no native `session()`. Each `run`
is a fresh sandbox execution that starts from the files the previous one left (so the
filesystem state persists) and in the directory it ended in (cwd persists). Shell
variables, functions and background processes do NOT persist between runs; that is the
price of one isolated execution per step. Workspace capture goes through stdout, so a
workspace is limited to ~4 MiB.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from typing import Any, AsyncIterator

from posttrain.types import ExecLimits, ExecResult, FileChange

MARK = "@@PT_SESSION@@"
RUNNER = r'''
import base64, json, os, subprocess, sys
req = json.loads(sys.stdin.read())
root = os.getcwd()
try:
    os.chdir(os.path.join(root, req["cwd"]))
except OSError:
    pass
try:
    p = subprocess.run(["bash", "-c", req["cmd"] + '\n__rc=$?; pwd > /tmp/.pt_cwd; exit $__rc'], capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=req["timeout"])
    rc, out, err, to = p.returncode, p.stdout, p.stderr, False
except subprocess.TimeoutExpired as e:
    rc, out, err, to = None, e.stdout or b"", e.stderr or b"", True
try:
    cwd = os.path.relpath(open("/tmp/.pt_cwd").read().strip(), root)
except OSError:
    cwd = req["cwd"]
files = {}
for d, _, names in os.walk(root):
    for n in names:
        full = os.path.join(d, n)
        if os.path.isfile(full) and not os.path.islink(full):
            files[os.path.relpath(full, root)] = base64.b64encode(open(full, "rb").read()).decode()
sys.stdout.write("\n%s%s" % ("@@PT_SESSION@@", json.dumps({"rc": rc, "timeout": to, "cwd": cwd if not cwd.startswith("..") else ".",
    "out": out.decode(errors="replace")[-65536:], "err": err.decode(errors="replace")[-65536:], "files": files})))
'''


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


class ExecSession:
    def __init__(self, sandbox: Any, image: str = "host", limits: ExecLimits | None = None) -> None:
        self.sandbox, self.image = sandbox, image
        self.limits = limits or ExecLimits(wall_s=30.0, cpu_s=30.0, memory_mb=512, output_bytes=8 << 20)
        self.files: dict[str, bytes] = {}
        self.cwd = "."
        self._snap: dict[str, str] = {}
        self.closed = False

    async def run(self, cmd: str, timeout: float | None = None) -> ExecResult:
        t = float(timeout or self.limits.wall_s)
        lim = ExecLimits(**{**self.limits.__dict__, "wall_s": t + 5.0, "cpu_s": t + 5.0})
        req = json.dumps({"cmd": cmd, "cwd": self.cwd, "timeout": t})
        res = await self.sandbox.exec(["python3", "-I", "-c", RUNNER], files=dict(self.files), stdin=req, limits=lim, image=self.image)
        at = res.stdout.rfind(MARK)
        if at < 0:  # the runner itself died (limits, sandbox failure): state is unchanged
            status = "sandbox_error" if res.status == "ok" else res.status
            return ExecResult(status=status, exit_code=res.exit_code, stderr=res.stderr, error=res.error or "session runner gave no state")
        st = json.loads(res.stdout[at + len(MARK):])
        self.files = {k: base64.b64decode(v) for k, v in st["files"].items()}
        self.cwd = st["cwd"]
        status = "timeout" if st["timeout"] else "ok" if st["rc"] == 0 else "nonzero_exit"
        return ExecResult(status=status, exit_code=st["rc"], stdout=st["out"], stderr=st["err"], wall_s=res.wall_s,
                          cpu_s=res.cpu_s, image_digest=res.image_digest, limits=lim)

    async def read_file(self, path: str) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]

    async def write_file(self, path: str, data: str | bytes) -> None:
        self.files[path] = data.encode() if isinstance(data, str) else bytes(data)

    async def snapshot(self) -> dict[str, str]:
        self._snap = {k: _sha(v) for k, v in self.files.items()}
        return dict(self._snap)

    async def diff(self) -> list[FileChange]:
        now = {k: _sha(v) for k, v in self.files.items()}
        out = [FileChange(k, "added" if k not in self._snap else "modified", len(self.files[k]), h)
               for k, h in sorted(now.items()) if self._snap.get(k) != h]
        return out + [FileChange(k, "deleted") for k in sorted(set(self._snap) - set(now))]

    async def close(self) -> None:
        self.closed = True


@contextlib.asynccontextmanager
async def session_for(sandbox: Any, image: str = "host") -> AsyncIterator[Any]:
    """The sandbox's native session when it has one, else an `ExecSession`."""
    native = getattr(sandbox, "session", None)
    if native is not None:
        async with native(image) as s:
            yield s
        return
    s = ExecSession(sandbox, image)
    try:
        yield s
    finally:
        await s.close()
