"""`posttrain sandbox image build SPEC.yaml`: a content-addressed image layer.

    # spec.yaml
    packages: ["attrs==23.2.0"]        # pinned, exact: name==version (installed with --no-deps,
                                       # so the list must be the full closure -> reproducible)
    wheels: ["wheels/mypkg-1.0-py3-none-any.whl"]   # optional, relative to the spec file
    files: {"data/words.txt": "alpha\\nbeta\\n"}     # optional: path inside /opt/image/files

The layer is installed into a temporary directory, normalised (no bytecode caches, no
install-location metadata), listed as sorted (path, executable bit, sha256), and the
digest is sha256 over that listing plus the base identity. Same spec, same host base ->
same digest; a built image is reused, never rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox.images import Image, base_identity, images_dir
from posttrain.sandbox.workspace import clean_relpath

_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+$")
_DROP = {"__pycache__", "direct_url.json", "INSTALLER", "REQUESTED"}


def load_spec(path: str | Path) -> dict:
    import yaml

    p = Path(path)
    if not p.is_file():
        raise SandboxError(f"image spec {str(p)!r} does not exist")
    try:
        spec = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise SandboxError(f"image spec {str(p)!r} is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(spec, dict):
        raise SandboxError(f"image spec {str(p)!r} must be a mapping with packages/wheels/files")
    unknown = set(spec) - {"packages", "wheels", "files", "base"}
    if unknown:
        raise SandboxError(f"image spec {str(p)!r}: unknown key(s) {sorted(unknown)}; known: base, packages, wheels, files")
    if spec.get("base", "host") != "host":
        raise SandboxError(f"image spec {str(p)!r}: base must be 'host' (the host's /usr, read-only)")
    for pkg in spec.get("packages") or []:
        if not isinstance(pkg, str) or not _PIN.match(pkg):
            raise SandboxError(f"image spec {str(p)!r}: package {pkg!r} must be pinned exactly as name==version")
    wheels = []
    for w in spec.get("wheels") or []:
        wp = (p.parent / str(w)).resolve()
        if not wp.is_file() or wp.suffix != ".whl":
            raise SandboxError(f"image spec {str(p)!r}: wheel {w!r} is not a .whl file")
        wheels.append(str(wp))
    files = spec.get("files") or {}
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise SandboxError(f"image spec {str(p)!r}: files must map paths to text contents")
    return {"packages": list(spec.get("packages") or []), "wheels": wheels, "files": {clean_relpath(k): v for k, v in files.items()}}


def _listing(layer: Path) -> list[tuple[str, bool, str]]:
    out = []
    for dirpath, dirnames, filenames in os.walk(layer):
        dirnames.sort()
        for f in sorted(filenames):
            fp = Path(dirpath) / f
            rel = str(fp.relative_to(layer))
            if fp.is_symlink():
                out.append((rel, False, "symlink:" + os.readlink(fp)))
            else:
                out.append((rel, bool(fp.stat().st_mode & 0o111), hashlib.sha256(fp.read_bytes()).hexdigest()))
    return out


def _normalise(layer: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(layer, topdown=True):
        for d in [d for d in dirnames if d in _DROP]:
            shutil.rmtree(Path(dirpath) / d)
            dirnames.remove(d)
        for f in filenames:
            if f in _DROP or f.endswith(".pyc"):
                os.remove(Path(dirpath) / f)
    for dirpath, _d, filenames in os.walk(layer):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            fp = Path(dirpath) / f
            if not fp.is_symlink():
                os.chmod(fp, 0o755 if fp.stat().st_mode & 0o111 else 0o644)


def build_image(spec_path: str | Path, quiet: bool = True) -> Image:
    spec = load_spec(spec_path)
    tmp = images_dir() / f".build-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    layer = tmp / "layer"
    (layer / "site-packages").mkdir(parents=True)
    (layer / "files").mkdir()
    try:
        reqs = spec["packages"] + spec["wheels"]
        if reqs:
            cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--disable-pip-version-check",
                   "--no-input", "--target", str(layer / "site-packages"), *reqs]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
                raise SandboxError(f"image build: pip could not install {reqs}: {tail}")
        for rel, text in spec["files"].items():
            dst = layer / "files" / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(text)
        _normalise(layer)
        listing = _listing(layer)
        blob = json.dumps({"base": base_identity(), "layer": listing}, sort_keys=True).encode()
        hexd = hashlib.sha256(blob).hexdigest()
        final = images_dir() / hexd
        if not (final / "digest").exists():
            (tmp / "spec.json").write_text(json.dumps(spec, indent=1, sort_keys=True))
            (tmp / "digest").write_text(f"sha256:{hexd}\n")
            os.chmod(tmp, 0o755)
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)
        return Image(f"sha256:{hexd}", final / "layer")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
