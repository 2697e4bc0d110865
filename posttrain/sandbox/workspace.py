"""The writable workspace: staging files in, listing what changed, reading files out safely.

The host side never follows a symlink the sandboxed program created: listings use
lstat, and reads walk the path one component at a time with O_NOFOLLOW under a
directory fd, so `ln -s /etc/shadow out.txt` (or a symlinked parent directory) can
never make the sandbox read a host file. Symlinks are reported as changes with the
sha256 of their target string.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import stat
from pathlib import Path, PurePosixPath
from typing import Mapping

from posttrain.errors import SandboxError
from posttrain.types import FileChange

Manifest = dict[str, tuple[int, str]]  # relative path -> (size, sha256)
MAX_ENTRIES = 20_000  # a program that creates more files than this gets a partial listing
_counter = itertools.count()


def clean_relpath(path: str) -> str:
    """Normalise a workspace-relative path ('/work/a/b' and 'a/b' are the same); reject escapes."""
    p = str(path)
    if p.startswith("/work/"):
        p = p[len("/work/") :]
    pp = PurePosixPath(p)
    if not p or pp.is_absolute() or any(part in ("..", "") for part in pp.parts) or "\0" in p:
        raise SandboxError(f"bad workspace path {path!r}: must be relative, inside /work, without '..'")
    return str(pp)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Workspace:
    """A host directory bind-mounted read-write at /work inside the sandbox."""

    def __init__(self, path: Path, owner: int | None) -> None:
        self.path = path
        self.owner = owner

    @classmethod
    def create(cls, root: Path, owner: int | None) -> "Workspace":
        path = root / f"ws-{os.getpid()}-{next(_counter)}"
        path.mkdir(mode=0o700)  # the episode can make setuid files here: no other host user may reach them
        if owner is not None:
            os.chown(path, owner, owner)
        return cls(path, owner)

    def write_files(self, files: Mapping[str, "str | bytes"] | None) -> Manifest:
        """Stage files before the run; returns their manifest (no need to re-read them)."""
        out: Manifest = {}
        for name, data in (files or {}).items():
            rel = clean_relpath(name)
            blob = data.encode() if isinstance(data, str) else bytes(data)
            self.write(rel, blob)
            out[rel] = (len(blob), sha256_bytes(blob))
        return out

    def write(self, rel: str, blob: bytes) -> None:
        rel = clean_relpath(rel)
        parts = rel.split("/")
        dfd = os.open(self.path, os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for part in parts[:-1]:
                try:
                    os.mkdir(part, 0o755, dir_fd=dfd)
                    if self.owner is not None:
                        os.chown(part, self.owner, self.owner, dir_fd=dfd, follow_symlinks=False)
                except FileExistsError:
                    pass
                nfd = os.open(part, os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
                os.close(dfd)
                dfd = nfd
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=dfd)
            try:
                view = memoryview(blob)
                while view:
                    view = view[os.write(fd, view) :]
                if self.owner is not None:
                    os.fchown(fd, self.owner, self.owner)
            finally:
                os.close(fd)
        except NotADirectoryError:
            raise SandboxError(f"workspace path {rel!r} goes through a non-directory") from None
        except OSError as e:
            if e.errno == 40:  # ELOOP: a component is a symlink
                raise SandboxError(f"workspace path {rel!r} goes through a symlink") from None
            raise
        finally:
            os.close(dfd)

    def read(self, rel: str, limit: int = 64 << 20) -> bytes:
        """Read a regular file, never following a symlink anywhere on the path."""
        rel = clean_relpath(rel)
        parts = rel.split("/")
        dfd = os.open(self.path, os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for part in parts[:-1]:
                nfd = os.open(part, os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
                os.close(dfd)
                dfd = nfd
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
        except OSError as e:
            raise SandboxError(f"cannot read workspace file {rel!r}: {os.strerror(e.errno or 0)}") from None
        finally:
            os.close(dfd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SandboxError(f"workspace file {rel!r} is not a regular file")
            chunks, total = [], 0
            while total < limit:
                b = os.read(fd, min(1 << 20, limit - total))
                if not b:
                    break
                chunks.append(b)
                total += len(b)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def manifest(self) -> Manifest:
        out: Manifest = {}
        self._walk(self.path, "", out)
        return out

    def _walk(self, d: Path, prefix: str, out: Manifest) -> None:
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            if len(out) >= MAX_ENTRIES:
                return
            rel = prefix + e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                self._walk(Path(e.path), rel + "/", out)
            elif stat.S_ISLNK(st.st_mode):
                target = os.readlink(e.path)
                out[rel] = (len(target), sha256_bytes(b"symlink:" + os.fsencode(target)))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = (st.st_size, _hash_file(e.path))

    def remove(self) -> None:
        def fix(func, path, _exc):  # the program may have chmod-ed a directory to 000
            try:
                os.chmod(os.path.dirname(path), 0o700)
                func(path)
            except OSError:
                pass

        shutil.rmtree(self.path, onerror=fix)


def _hash_file(path: str) -> str:
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            h.update(b)
    finally:
        os.close(fd)
    return h.hexdigest()


def diff(before: Manifest, after: Manifest) -> tuple[FileChange, ...]:
    out: list[FileChange] = []
    for p, (size, sha) in sorted(after.items()):
        if p not in before:
            out.append(FileChange(p, "added", size, sha))
        elif before[p][1] != sha:
            out.append(FileChange(p, "modified", size, sha))
    for p in sorted(set(before) - set(after)):
        out.append(FileChange(p, "deleted", 0, ""))
    return tuple(out)


def copy_tree_into(src: Path, dst: Path) -> None:
    """An image's WORKDIR tree (owned by the sandbox uid) into a fresh workspace, owners and modes kept."""
    import subprocess

    if src.is_dir() and any(src.iterdir()):
        proc = subprocess.run(["cp", "-a", "--", f"{src}/.", str(dst)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SandboxError(f"cannot copy the image's workdir into the workspace: {proc.stderr.strip()[:200]}")


def sweep_stale(root: Path) -> int:
    """Remove workspaces of posttrain processes that died without cleaning up."""
    removed = 0
    for d in root.glob("ws-*-*"):
        try:
            pid = int(d.name.split("-")[1])
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            Workspace(d, None).remove()
            removed += 1
        except PermissionError:
            pass
    return removed
