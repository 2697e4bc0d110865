"""Images: what a sandbox sees read-only. Content-addressed by a sha256 digest.

The base is always the host's /usr plus the clean Python runtime (see `runtime.py`);
the built-in image named "host" is exactly that. A built image adds one layer directory,
bound at /opt/image: `site-packages/` (on PYTHONPATH) and `files/`. Its digest is the
sha256 over the layer's sorted (path, mode, sha256) listing plus the base identity, so
the same spec on the same host yields the same digest. Building lives in `image_build.py`.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox.runtime import private_dir, python_runtime, sandbox_home

LAYER_INSIDE = "/opt/image"
_CHECKED: "dict[str, Image]" = {}
_DIGEST_RE = re.compile(r"^(sha256:)?[0-9a-f]{12,64}$")


@dataclass(frozen=True)
class RootfsImage:
    """A Debian rootfs built by `rootfs_build.py`: overlay lowers (bottom first) and how to run in it."""

    digest: str
    lowers: tuple[Path, ...]
    workdir: str
    env: tuple[tuple[str, str], ...]
    uid: int
    gid: int
    workdir_tree: Path  # the image's WORKDIR as a plain tree, copied into each episode's workspace
    manifest: Path


@dataclass(frozen=True)
class Image:
    digest: str  # "sha256:<hex>"
    layer: Path | None = None  # None for the base image
    rootfs: RootfsImage | None = None  # set: the sandbox's root is this image, not the host's /usr

    def binds(self) -> tuple[str, ...]:
        if self.layer is None:
            return ()
        return ("--ro-bind", str(self.layer), LAYER_INSIDE)

    @property
    def pythonpath(self) -> str:
        return f"{LAYER_INSIDE}/site-packages" if self.layer is not None else ""


def images_dir() -> Path:
    return private_dir(sandbox_home() / "images")  # rootfs layers keep setuid bits: see rootfs_store


@lru_cache(maxsize=1)
def base_identity() -> str:
    """What the base image is: host python version and runtime mirror (keyed by its install)."""
    return f"python={sys.version.split()[0]};runtime={python_runtime().name};usr=host"


@lru_cache(maxsize=1)
def host_image() -> Image:
    return Image("sha256:" + hashlib.sha256(json.dumps({"base": base_identity()}).encode()).hexdigest())


def resolve(name: str) -> Image:
    """'host', a full 'sha256:…' digest, or a unique prefix of one, -> Image. Else SandboxError."""
    if not isinstance(name, str) or not name:
        raise SandboxError(f"bad image {name!r}: expected 'host' or a sha256 digest")
    if name in ("host", host_image().digest):
        return host_image()
    if not _DIGEST_RE.match(name):
        raise SandboxError(f"bad image digest {name!r}: expected 'host' or 'sha256:<hex>'")
    hexpart = name.removeprefix("sha256:")
    if name in _CHECKED:
        return _CHECKED[name]
    rootfs = [p for p in images_dir().glob(f"{hexpart}*") if (p / "image.json").is_file()]
    if len(rootfs) == 1:
        img = load_rootfs(rootfs[0].name)
        if img is None:
            raise SandboxError(f"image {name!r} is corrupt (a layer does not match its digest): rebuild it with `posttrain sandbox image build`")
        _CHECKED[name] = Image(img.digest, None, img)  # checked once per process (a stat walk of every layer)
        return _CHECKED[name]
    matches = [p for p in images_dir().glob(f"{hexpart}*") if (p / "layer").is_dir() and (p / "digest").exists()]
    if not matches:
        raise SandboxError(f"unknown image {name!r}: build it with `posttrain sandbox image build SPEC.yaml`")
    if len(matches) > 1:
        raise SandboxError(f"ambiguous image prefix {name!r}: matches {len(matches)} images")
    return Image((matches[0] / "digest").read_text().strip(), matches[0] / "layer")


def load_rootfs(digest: str, full_check: bool = False) -> RootfsImage | None:
    """The stored rootfs image if it and all its layers are whole, else None (bad layers are removed)."""
    from posttrain.sandbox.rootfs_store import load_layer

    d = images_dir() / digest.removeprefix("sha256:")
    try:
        meta = json.loads((d / "image.json").read_text())
    except (OSError, ValueError):
        return None
    lowers = []
    for layer in meta["layers"]:
        got = load_layer(layer["key"], full_check)
        if got is None or got.digest != layer["digest"]:
            return None
        lowers.append(got.tree)
    return RootfsImage(meta["digest"], tuple(lowers), meta["workdir"], tuple(sorted(meta["env"].items())),
                       meta["user"]["uid"], meta["user"]["gid"], d / "workdir", d / "image.json")


def forget_checks() -> None:
    """Check every image and layer again on its next use, as a new process would."""
    from posttrain.sandbox.rootfs_store import forget_checks as forget_layers

    _CHECKED.clear()
    forget_layers()
