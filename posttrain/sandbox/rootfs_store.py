"""Where Debian-rootfs images live, and how a stored layer proves it is whole.

    <images>/layers/<key>/tree        the layer's files (overlayfs upper format: whiteouts are 0/0 char devices)
    <images>/layers/<key>/layer.json  {"key", "digest", "fast", "instruction", "files"}
    <images>/<hex>/image.json          the manifest: layers, packages (dpkg-query -W), env, workdir, user, build command
    <images>/<hex>/workdir/            the image's WORKDIR as a plain tree (copied into each episode's /work)
    <images>/recipes/<recipe key>      the digest a recipe built to (so a rebuild is a lookup)
    <images>/logs/                     build logs (kept: an error names its log file)

A layer's key is the hash of its parent's key and its instruction (COPY: the sources'
content), so images that share a prefix share layers. Its `digest` is sha256 over the
sorted (path, kind, mode, sha256 | link target) listing of its tree; `fast` hashes the
(path, size, mtime) listing. Reuse checks `fast` (a stat walk, well under a second);
`verify` recomputes `digest`. A layer or image that fails either is deleted and rebuilt.
Everything is renamed into place only when complete, so a half-built one never exists.
`gc` leaves alone what is in use: an image an episode runs on (the session holds a shared
`flock` on its image.json: `hold`) with its layers, and the temporary directory of a build
whose process is still alive (its pid ends the name).
Files are owned by the sandbox's host uid: the sandbox's root maps to it, so overlay
copy-up works inside the user namespace (host-root-owned files could not be copied up).
Their setuid and setgid bits are kept (`su` and `passwd` look as Debian ships them; inside,
where every id maps to that one uid, they grant nothing); the store is reachable by that
uid and root only (`private_dir`), so no other host user can run one of them as that uid.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from posttrain.sandbox.runtime import SANDBOX_HOST_ID, private_dir, sandbox_home

_CHECKED: "dict[str, StoredLayer]" = {}  # layers checked whole in this process (images share their base)


def images_dir() -> Path:
    """The image store (the same directory as `images.images_dir`; not imported from there: no cycle)."""
    return private_dir(sandbox_home() / "images")


_OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")


def store_dir(name: str) -> Path:
    d = images_dir() / name
    d.mkdir(exist_ok=True)
    os.chmod(d, 0o755)
    return d


def layer_dir(key: str) -> Path:
    return store_dir("layers") / key


def _entries(tree: Path):
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            yield os.path.relpath(p, tree), p, os.lstat(p)


def _file_sha(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def content_digest(tree: Path) -> tuple[str, str, int]:
    """(sha256 of the full content listing, sha256 of the (path, size, mtime) listing, number of entries)."""
    full, fast, n = hashlib.sha256(), hashlib.sha256(), 0
    for rel, p, st in _entries(tree):
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISREG(st.st_mode):
            what = "f:" + _file_sha(p)
        elif stat.S_ISLNK(st.st_mode):
            what = "l:" + os.readlink(p)
        elif stat.S_ISCHR(st.st_mode):
            what = f"c:{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"  # 0:0 is an overlay whiteout
        elif stat.S_ISDIR(st.st_mode):
            what = "d:" + ("opaque" if _is_opaque(p) else "")
        else:
            what = "o"
        full.update(f"{rel}\0{mode:o}\0{what}\n".encode())
        fast.update(f"{rel}\0{st.st_size if not stat.S_ISDIR(st.st_mode) else 0}\0{st.st_mtime_ns}\n".encode())
        n += 1
    return "sha256:" + full.hexdigest(), fast.hexdigest(), n


def fast_digest(tree: Path) -> str:
    fast = hashlib.sha256()
    for rel, _p, st in _entries(tree):
        fast.update(f"{rel}\0{st.st_size if not stat.S_ISDIR(st.st_mode) else 0}\0{st.st_mtime_ns}\n".encode())
    return fast.hexdigest()


def _is_opaque(path: str) -> bool:
    for attr in _OPAQUE:
        try:
            if os.getxattr(path, attr, follow_symlinks=False) == b"y":
                return True
        except OSError:
            pass
    return False


def finalize_tree(tree: Path) -> None:
    """Make a just-built upper usable as a lower inside the sandbox's user namespace.

    Opaque directories carry trusted.overlay.opaque (built as real root); an overlay
    mounted in a user namespace reads user.overlay.opaque, so both are set. Everything
    is owned by the sandbox uid (lchown: links are not followed). A chown clears a file's
    setuid and setgid bits; they are set again, so the layer holds the modes its build made."""
    os.chmod(tree, 0o755)
    for _rel, p, st in _entries(tree):
        if stat.S_ISDIR(st.st_mode) and _is_opaque(p):
            os.setxattr(p, "user.overlay.opaque", b"y", follow_symlinks=False)
        os.lchown(p, SANDBOX_HOST_ID, SANDBOX_HOST_ID)
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            os.chmod(p, stat.S_IMODE(st.st_mode))
    os.lchown(tree, SANDBOX_HOST_ID, SANDBOX_HOST_ID)


@dataclass(frozen=True)
class StoredLayer:
    key: str
    tree: Path
    digest: str


def commit_layer(key: str, tmp: Path, instruction: str) -> StoredLayer:
    """`tmp/tree` is complete: record its digests and rename it into the store."""
    finalize_tree(tmp / "tree")
    digest, fast, n = content_digest(tmp / "tree")
    (tmp / "layer.json").write_text(json.dumps({"key": key, "digest": digest, "fast": fast, "files": n,
                                                "instruction": instruction}, indent=1))
    final = layer_dir(key)
    _CHECKED.pop(key, None)
    remove_tree(final)
    os.chmod(tmp, 0o755)
    tmp.rename(final)
    return StoredLayer(key, final / "tree", digest)


def load_layer(key: str, full_check: bool = False) -> StoredLayer | None:
    """The stored layer if it is whole (fast listing, or full digest with `full_check`); else None (and removed)."""
    d = layer_dir(key)
    if not full_check and key in _CHECKED:
        return _CHECKED[key]
    try:
        meta = json.loads((d / "layer.json").read_text())
        ok = (content_digest(d / "tree")[0] == meta["digest"]) if full_check else fast_digest(d / "tree") == meta["fast"]
    except (OSError, ValueError, KeyError):
        ok, meta = False, {}
    if not ok:
        _CHECKED.pop(key, None)
        if d.exists():
            remove_tree(d)
        return None
    _CHECKED[key] = StoredLayer(key, d / "tree", meta["digest"])
    return _CHECKED[key]


def forget_checks() -> None:
    """Check every layer again on its next use, as a new process would."""
    _CHECKED.clear()


def remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():  # read-only directories from a build: make them writable, then retry
            for dirpath, _d, _f in os.walk(path):
                os.chmod(dirpath, 0o755)
            shutil.rmtree(path, ignore_errors=True)


def hold(manifest: Path) -> int:
    """A shared lock on an image (its image.json) for as long as an episode runs on it; close the fd to
    release. `gc` skips a held image. SandboxError when gc removed the image while this waited."""
    from posttrain.errors import SandboxError

    try:
        fd = os.open(manifest, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise SandboxError(f"image {manifest.parent.name[:12]} is gone ({e.strerror}): build it again") from None
    fcntl.flock(fd, fcntl.LOCK_SH)
    if os.fstat(fd).st_nlink == 0:  # gc removed it between the open and the lock
        os.close(fd)
        raise SandboxError(f"image {manifest.parent.name[:12]} was garbage-collected: build it again")
    return fd


def _claim(manifest: Path) -> int | None:
    """An exclusive lock on an image nobody holds (gc removes it under the lock), or None when one is in use."""
    try:
        fd = os.open(manifest, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1  # no manifest to lock: nothing can hold it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _builder_alive(tmp: Path) -> bool:
    """Whether the build that owns a temporary directory (`...-<pid>`) is still running."""
    pid = tmp.name.rsplit("-", 1)[-1]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gc(keep_digests: set[str] | None = None) -> dict[str, int]:
    """Remove dead builds' partial trees, images not in `keep_digests` (None: keep all) that no episode
    holds, and unreferenced layers. `skipped` counts images kept because an episode runs on them."""
    root = images_dir()
    removed = {"partial": 0, "images": 0, "layers": 0, "skipped": 0}
    for p in list(root.glob(".build-*")) + list(store_dir("layers").glob(".tmp-*")):
        if not _builder_alive(p):
            remove_tree(p)
            removed["partial"] += 1
    used: set[str] = set()
    for img in root.glob("*/image.json"):
        try:
            meta = json.loads(img.read_text())
        except (OSError, ValueError):
            meta = None
        if meta is None or (keep_digests is not None and meta["digest"] not in keep_digests):
            fd = _claim(img)
            if fd is None:  # an episode runs on it: keep it and its layers
                removed["skipped"] += 1
                used.update(layer["key"] for layer in (meta or {}).get("layers", []))
                continue
            remove_tree(img.parent)
            removed["images"] += 1
            if fd >= 0:
                os.close(fd)
            continue
        used.update(layer["key"] for layer in meta["layers"])
    for d in store_dir("layers").iterdir():
        if d.name not in used:
            remove_tree(d)
            removed["layers"] += 1
    for r in store_dir("recipes").iterdir():
        if not (root / r.read_text().strip().removeprefix("sha256:") / "image.json").is_file():
            r.unlink()
    return removed
