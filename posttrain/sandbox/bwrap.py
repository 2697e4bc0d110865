"""The bwrap command line: namespaces, the read-only root, the workspace, the environment.

Every sandbox runs with --unshare-all (user, mount, pid, net, ipc, uts and cgroup
namespaces; the network namespace has only a loopback device), --die-with-parent and
--new-session (no TIOCSTI into our terminal). The root is a fresh tmpfs, remounted
read-only, holding read-only binds of the host's /usr, a clean Python runtime at
/opt/python, the image layer at /opt/image, and a minimal synthetic /etc. The only
writable places are /work (the workspace) and /tmp (a size-capped tmpfs).

When this process is root, bwrap itself is started as an unused host uid
(`SANDBOX_HOST_ID`): the user namespace then maps the sandbox's uid 1000 to that
powerless id, not to host root, so a file or /proc entry owned by host root is never
"ours" inside.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from posttrain.sandbox.images import RootfsImage
from posttrain.sandbox.runtime import PY_INSIDE, SANDBOX_HOST_ID, bwrap_path, python_runtime, sandbox_home

INSIDE_UID = 1000
WORKDIR = "/work"
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "mime.types", "nsswitch.conf")
_ETC_DIRS = ("ld.so.conf.d", "alternatives", "ssl", "ca-certificates")


def fixed_env(extra_pythonpath: str = "") -> dict[str, str]:
    """The whole environment of a sandboxed program: nothing leaks from the host."""
    env = {
        "PATH": f"{PY_INSIDE}/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": WORKDIR,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONUNBUFFERED": "1",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "SHELL": "/bin/bash",
        "TERM": "dumb",
    }
    if extra_pythonpath:
        env["PYTHONPATH"] = extra_pythonpath
    return env


def run_as() -> int | None:
    """Host uid to start bwrap as (None: stay as we are)."""
    return SANDBOX_HOST_ID if os.geteuid() == 0 else None


@lru_cache(maxsize=1)
def synthetic_etc() -> Path:
    """passwd/group/hosts/hostname for the sandbox user, written once."""
    d = sandbox_home() / "etc"
    d.mkdir(exist_ok=True)
    os.chmod(d, 0o755)
    content = {
        "passwd": f"root:x:0:0:root:/root:/bin/false\nsandbox:x:{INSIDE_UID}:{INSIDE_UID}:sandbox:{WORKDIR}:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        "group": f"root:x:0:\nsandbox:x:{INSIDE_UID}:\nnogroup:x:65534:\n",
        "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
        "hostname": "sandbox\n",
    }
    for name, text in content.items():
        p = d / name
        if not p.exists() or p.read_text() != text:
            tmp = d / f".{name}.{os.getpid()}"
            tmp.write_text(text)
            os.chmod(tmp, 0o644)
            tmp.replace(p)
    return d


@lru_cache(maxsize=1)
def _root_binds() -> tuple[str, ...]:
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
        host = Path("/") / top
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{top}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{top}"]
    etc = synthetic_etc()
    for name in ("passwd", "group", "hosts", "hostname"):
        args += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    for name in _ETC_FILES + _ETC_DIRS:
        if Path("/etc", name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    args += ["--ro-bind", str(python_runtime()), PY_INSIDE]
    return tuple(args)


def bwrap_argv(
    cmd: Sequence[str],
    workspace: Path | None,
    env: dict[str, str],
    image_binds: Sequence[str] = (),
    tmp_bytes: int = 64 << 20,
    workspace_tmpfs_bytes: int = 0,
    extra: Sequence[str] = (),
    read_only_dev: bool = False,
) -> list[str]:
    """argv for one sandbox. `workspace` is bound at /work; without it /work is a sized tmpfs.

    `read_only_dev`: /dev is remounted read-only (device nodes stay usable; /dev/fd,
    /dev/stdin... cannot be replaced). The zygote's executions then mount their own
    /dev/shm and /dev/pts over it."""
    argv = [
        bwrap_path(),
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--uid", str(INSIDE_UID),
        "--gid", str(INSIDE_UID),
        "--hostname", "sandbox",
        *_root_binds(),
        *image_binds,
        "--proc", "/proc",
        "--dev", "/dev",
        *(("--remount-ro", "/dev") if read_only_dev else ()),
        "--size", str(tmp_bytes), "--tmpfs", "/tmp",
    ]  # fmt: skip
    if workspace is not None:
        argv += ["--bind", str(workspace), WORKDIR]
    else:
        argv += ["--size", str(workspace_tmpfs_bytes or (64 << 20)), "--tmpfs", WORKDIR]
    argv += ["--remount-ro", "/", "--chdir", WORKDIR, "--clearenv"]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    argv += [*extra, "--", *cmd]
    return argv


def rootfs_argv(
    cmd: Sequence[str],
    image: "RootfsImage",
    workspace: Path | None,
    env: dict[str, str],
    binds: Sequence[str] = (),
    extra: Sequence[str] = (),
    uid: int | None = None,
) -> list[str]:
    """argv for one sandbox whose root is a Debian-rootfs image on a throwaway overlay.

    Same namespaces as `bwrap_argv` (only `lo`), the image's layers as read-only overlay
    sources and an invisible tmpfs taking the writes (`--tmp-overlay /`): every episode
    starts from the pristine image and leaves nothing behind. The workspace is bound at
    the image's WORKDIR; /proc, /dev (with its own /dev/shm) and /tmp are fresh."""
    argv = [
        bwrap_path(), "--unshare-all", "--die-with-parent", "--new-session",
        "--uid", str(image.uid if uid is None else uid), "--gid", str(image.gid if uid is None else uid),
        "--hostname", "sandbox",
        *[a for lower in image.lowers for a in ("--overlay-src", str(lower))], "--tmp-overlay", "/",
        "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
    ]  # fmt: skip
    if workspace is not None:
        argv += ["--bind", str(workspace), image.workdir]
    argv += [*binds, "--chdir", image.workdir, "--clearenv"]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    return [*argv, *extra, "--", *cmd]


def rootfs_env(image: "RootfsImage") -> dict[str, str]:
    """The image's ENV over a fixed base: nothing from the host leaks in."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root" if image.uid == 0 else image.workdir,
           "TMPDIR": "/tmp", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "TERM": "dumb", "SHELL": "/bin/bash", "DEBIAN_FRONTEND": "noninteractive"}
    env.update(dict(image.env))
    return env
