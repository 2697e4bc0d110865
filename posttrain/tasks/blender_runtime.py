"""Where Blender comes from: a pinned bpy 5.0.1 virtualenv outside posttrain's environment.

bpy is GPL-3.0, a 375 MB wheel (965 MB installed) that needs CPython 3.11 and numpy<2, so
it never enters posttrain's venv or its dependencies. `make blender` builds it once per
machine at `<sandbox home>/blender/bpy-5.0.1` (`POSTTRAIN_BLENDER_VENV` overrides) with the
base CPython 3.11 of posttrain's venv. The sandbox binds
only its site-packages, read-only, at /opt/bpy and runs it with the sandbox's own clean
CPython (/opt/python, the same 3.11 interpreter posttrain runs on), so nothing else of the
venv is trusted or visible.

Why a venv directory and not a rootfs image layer: the image builder (docs/sandbox.md
"Images") needs root and mmdebstrap and a Debian python3.11 build; the venv binds into
the existing host-python sandbox with the same namespaces, uid and limits, and builds in
about a minute here. The domain is refused at config load when it is missing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from posttrain.errors import ConfigError
from posttrain.sandbox.runtime import sandbox_home

BPY_VERSION = "5.0.1"
BUILD_COMMAND = "make blender"
INSIDE = "/opt/bpy"


def venv_dir() -> Path:
    env = os.environ.get("POSTTRAIN_BLENDER_VENV")
    return Path(env) if env else sandbox_home() / "blender" / f"bpy-{BPY_VERSION}"


def site_packages(venv: Path | None = None) -> Path:
    return (venv or venv_dir()) / "lib" / "python3.11" / "site-packages"


def missing_reason() -> str | None:
    """Why Blender cannot run here (None when it can), naming the command that fixes it."""
    if sys.version_info[:2] != (3, 11):
        return f"bpy {BPY_VERSION} needs CPython 3.11 for the sandbox interpreter; this is {sys.version.split()[0]}"
    meta = site_packages() / f"bpy-{BPY_VERSION}.dist-info"
    if not meta.is_dir():
        return f"no bpy {BPY_VERSION} runtime at {venv_dir()}: build it with `{BUILD_COMMAND}` (about 1 GB, ~1 min)"
    return None


def require_runtime() -> Path:
    """The site-packages to bind, or ConfigError with the build command."""
    why = missing_reason()
    if why is not None:
        raise ConfigError(f"domain blender_scene: {why}")
    return site_packages()
