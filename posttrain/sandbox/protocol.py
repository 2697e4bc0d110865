"""The Sandbox contract. Everything that runs untrusted code goes through it.

    res = await sandbox.exec(["python3", "main.py"], files={"main.py": src}, limits=ExecLimits(wall_s=2))
    async with sandbox.session(image) as s:
        r = await s.run("cd /work && ls")

`exec` never raises for what the program did (crash, timeout, OOM, output flood): that
is in `ExecResult.status`. It raises `SandboxError` only for bad requests (negative
limits, unknown image, closed session). A failure of the sandbox machinery itself is
`status == "sandbox_error"`, which verifiers turn into `infra_error`, never a score of 0.
"""

from __future__ import annotations

from typing import AsyncContextManager, Mapping, Protocol, Sequence, runtime_checkable

from posttrain.types import ExecLimits, ExecResult, FileChange

FileMap = Mapping[str, "str | bytes"]


@runtime_checkable
class Session(Protocol):
    """A persistent sandbox for multi-step work: cwd, env and files carry across `run`s."""

    async def run(self, cmd: str, timeout: float | None = None) -> ExecResult: ...

    async def read_file(self, path: str) -> bytes: ...

    async def write_file(self, path: str, data: str | bytes) -> None: ...

    async def snapshot(self) -> dict[str, str]: ...  # path -> sha256

    async def diff(self) -> list[FileChange]: ...  # against the last snapshot

    async def close(self) -> None: ...


@runtime_checkable
class Sandbox(Protocol):
    async def exec(
        self,
        cmd: Sequence[str],
        files: FileMap | None = None,
        stdin: str | bytes = b"",
        limits: ExecLimits | None = None,
        image: str = "host",
        read_files: Sequence[str] = (),
    ) -> ExecResult: ...

    def session(self, image: str = "host", limits: ExecLimits | None = None) -> AsyncContextManager[Session]: ...

    async def close(self) -> None: ...
