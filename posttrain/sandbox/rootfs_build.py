"""Build a Debian-rootfs image: mmdebstrap base, one overlay layer per instruction, a pinned manifest.

    img = build_rootfs(Path("Dockerfile"))     # RootfsImage; cached by recipe, reused in well under a second

The base is `mmdebstrap --variant=apt` of the suite (plus the base's packages, e.g.
python3 for `python:3.11-slim`) with a fixed SOURCE_DATE_EPOCH. Each RUN runs as real
root without a user namespace (inside one, apt fails on `_apt`-owned files) in bwrap
with `--overlay-src` of every layer below and `--overlay UPPER WORK /`; the host network
is shared only here, /tmp is a fresh 1777 tmpfs, and `apt-get clean` runs after the
command so downloaded .debs never stay in the layer. COPY and WORKDIR layers are written
host-side. The manifest pins every package (`dpkg-query -W`, name=version); the image
digest is sha256 over the recipe and that manifest, so two builds of one recipe from the
same archive state give the same digest (`verify` also checks every layer's content
digest). A failure is one line naming the instruction, the package apt could not find
and the log file; nothing half-built stays in the store.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox.dockerfile import Recipe, Step, parse_dockerfile, parse_yaml_spec
from posttrain.sandbox.images import RootfsImage, images_dir, load_rootfs
from posttrain.sandbox.rootfs_store import StoredLayer, commit_layer, layer_dir, load_layer, remove_tree, store_dir
from posttrain.sandbox.runtime import bwrap_path

BUILDER_VERSION = "2"  # 2: layers keep setuid and setgid bits
MIRROR = os.environ.get("POSTTRAIN_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SOURCE_DATE_EPOCH = "1700000000"
BUILD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _h(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def load_recipe(path: Path, allow_unreproducible: bool = False) -> Recipe:
    if path.suffix in (".yaml", ".yml"):
        return parse_yaml_spec(path)
    return parse_dockerfile(path, allow_unreproducible)


@contextmanager
def _build_lock():
    with open(images_dir() / ".build.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _copy_sources_hash(step: Step, context: Path, where: str) -> str:
    h = hashlib.sha256()
    for s in step.args[:-1]:
        src = context / s
        if not src.exists():
            raise SandboxError(f"{where}: COPY source {s!r} does not exist in {context}")
        paths = [src] if src.is_file() else sorted(p for p in src.rglob("*"))
        for p in paths:
            h.update(str(p.relative_to(context)).encode() + b"\0")
            if p.is_file() and not p.is_symlink():
                h.update(oct(p.stat().st_mode & 0o111).encode() + p.read_bytes())
    return h.hexdigest()


class Builder:
    def __init__(self, recipe: Recipe, log_dir: Path) -> None:
        self.recipe = recipe
        self.env = {"PATH": BUILD_PATH, "HOME": "/root", "DEBIAN_FRONTEND": "noninteractive", "LANG": "C.UTF-8",
                    **recipe.base_env}
        # Lower layers are owned by the sandbox uid (see rootfs_store), not by the building root: tell git
        # that is fine (command-line-level config, honoured for safe.directory). Build-time only.
        self.build_env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
        self.workdir, self.user = "/", "root"
        self.layers: list[StoredLayer] = []
        self.log_dir = log_dir

    def where(self, step: Step | None) -> str:
        return f"{self.recipe.source}:{step.line}" if step and step.line else self.recipe.source

    def _log(self, key: str) -> Path:
        return self.log_dir / f"{time.strftime('%Y%m%dT%H%M%S')}-{key[:12]}.log"

    def base(self) -> str:
        r = self.recipe
        key = _h({"v": BUILDER_VERSION, "suite": r.suite, "include": sorted(r.base_packages), "mirror": MIRROR,
                  "arch": os.uname().machine, "epoch": SOURCE_DATE_EPOCH})
        if (got := load_layer(key)) is None:
            got = self._build_base(key)
        self.layers.append(got)
        return key

    def _build_base(self, key: str) -> StoredLayer:
        if shutil.which("mmdebstrap") is None:
            raise SandboxError("image build needs mmdebstrap: apt-get install -y mmdebstrap")
        tmp = store_dir("layers") / f".tmp-{key[:12]}-{os.getpid()}"
        remove_tree(tmp)
        tmp.mkdir()
        log = self._log(key)
        inc = [f"--include={','.join(self.recipe.base_packages)}"] if self.recipe.base_packages else []
        cmd = ["mmdebstrap", "--variant=apt", "--mode=root", *inc, "--aptopt=Acquire::Retries \"3\"",
               self.recipe.suite, str(tmp / "tree"), MIRROR]
        try:
            with open(log, "w") as f:
                proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH})
            if proc.returncode != 0:
                raise SandboxError(f"{self.recipe.source}:1: base {self.recipe.suite} failed to build{_apt_reason(log)}; log: {log}")
            return commit_layer(key, tmp, "FROM " + " ".join(c if c != str(tmp / "tree") else "ROOTFS" for c in cmd))
        finally:
            remove_tree(tmp)

    def step(self, parent: str, step: Step) -> str:
        if step.op == "ENV":
            self.env[step.args[0]] = step.args[1]
            return _h([parent, "ENV", step.args])
        if step.op == "USER":
            self.user = step.args[0]
            return _h([parent, "USER", step.args])
        desc: list[object] = [parent, step.op, step.args, self.workdir, self.user, sorted(self.env.items())]
        if step.op == "WORKDIR":
            self.workdir = os.path.normpath(os.path.join(self.workdir, step.args[0]))
            desc[3] = self.workdir
        if step.op == "COPY":
            desc.append(_copy_sources_hash(step, self.recipe.context, self.where(step)))
        key = _h(desc)
        got = load_layer(key)
        if got is None:
            tmp = store_dir("layers") / f".tmp-{key[:12]}-{os.getpid()}"
            remove_tree(tmp)
            (tmp / "tree").mkdir(parents=True)
            try:
                {"RUN": self._run, "COPY": self._copy, "WORKDIR": self._mkdir}[step.op](step, tmp, key)
                got = commit_layer(key, tmp, step.text.strip())
            finally:
                remove_tree(tmp)
        self.layers.append(got)
        return key

    def _mkdir(self, step: Step, tmp: Path, key: str) -> None:
        (tmp / "tree" / self.workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)

    def _copy(self, step: Step, tmp: Path, key: str) -> None:
        dest = step.args[-1]
        dest_abs = os.path.normpath(os.path.join(self.workdir, dest))
        target = tmp / "tree" / dest_abs.lstrip("/")
        as_dir = dest.endswith("/") or dest in (".", "./") or dest_abs == self.workdir or len(step.args) > 2
        for s in step.args[:-1]:
            src = self.recipe.context / s
            if src.is_dir():
                shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
            else:
                out = target / src.name if as_dir else target
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, out, follow_symlinks=False)

    def _run(self, step: Step, tmp: Path, key: str) -> None:
        tree, work = tmp / "tree", tmp / "work"
        work.mkdir()
        log = self._log(key)
        wrapped = 'if [ "$0" = root ]; then /bin/sh -c "$1"; else runuser -u "$0" -- /bin/sh -c "$1"; fi; rc=$?; ' \
                  'apt-get clean >/dev/null 2>&1; exit $rc'
        argv = [bwrap_path(), "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
                *[a for layer in self.layers for a in ("--overlay-src", str(layer.tree))],
                "--overlay", str(tree), str(work), "/", "--proc", "/proc", "--dev", "/dev",
                "--perms", "1777", "--tmpfs", "/tmp", "--ro-bind", "/etc/resolv.conf", "/run/posttrain-resolv.conf",
                "--chdir", self.workdir, "--clearenv"]  # fmt: skip
        for k, v in {**self.build_env, **self.env}.items():
            argv += ["--setenv", k, v]
        script = f"cp /run/posttrain-resolv.conf /etc/resolv.conf 2>/dev/null; /bin/sh -c {shlex.quote(wrapped)} {shlex.quote(self.user)} {shlex.quote(step.args[0])}; rc=$?; rm -f /etc/resolv.conf; exit $rc"
        argv += ["--", "/bin/sh", "-c", script]
        with open(log, "w") as f:
            f.write(f"# {self.where(step)}: {step.text.strip()}\n")
            f.flush()
            proc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        for junk in ("run/posttrain-resolv.conf", "etc/resolv.conf"):
            p = tree / junk
            if p.is_file() or p.is_char_device():
                p.unlink()  # build-time only: the sandbox has no network (and no resolver) at run time
        if proc.returncode != 0:
            raise SandboxError(f"{self.where(step)}: {step.text.strip()[:100]!r} failed (exit {proc.returncode})"
                               f"{_apt_reason(log)}; log: {log}")


def _apt_reason(log: Path) -> str:
    text = log.read_text(errors="replace")
    m = re.search(r"Unable to locate package (\S+)|Package '?(\S+?)'? has no installation candidate", text)
    if m:
        return f": apt cannot find package {m.group(1) or m.group(2)!r}"
    m = re.search(r"^E: (.+)$", text, re.MULTILINE)
    if m:
        return f": {m.group(1)[:160]}"
    tail = [ln for ln in text.splitlines() if ln.strip()][-1:]
    return f": {tail[0][:160]}" if tail else ""


def recipe_key(recipe: Recipe) -> str:
    steps = []
    for s in recipe.steps:
        extra = _copy_sources_hash(s, recipe.context, recipe.source) if s.op == "COPY" else ""
        steps.append([s.op, list(s.args), extra])
    return _h({"v": BUILDER_VERSION, "suite": recipe.suite, "base": sorted(recipe.base_packages),
               "env": recipe.base_env, "steps": steps, "mirror": MIRROR})


def build_rootfs(path: str | Path, allow_unreproducible: bool = False, verify: bool = False) -> RootfsImage:
    """Build (or reuse) the image of a Dockerfile or YAML spec."""
    recipe = load_recipe(Path(path), allow_unreproducible)
    rkey = recipe_key(recipe)
    index = store_dir("recipes") / rkey
    if index.is_file():
        img = load_rootfs(index.read_text().strip(), full_check=verify)
        if img is not None:
            return img
    with _build_lock():
        if index.is_file():  # another process built it while we waited for the lock
            img = load_rootfs(index.read_text().strip(), full_check=verify)
            if img is not None:
                return img
        return _build_locked(recipe, rkey, index)


def _build_locked(recipe: Recipe, rkey: str, index: Path) -> RootfsImage:
    from posttrain.sandbox.rootfs_finish import finish_image

    if os.geteuid() != 0:
        raise SandboxError(f"{recipe.source}: building an image needs root (its RUN layers run as real root, "
                           "like `docker build`); reusing a built one does not")
    b = Builder(recipe, store_dir("logs"))
    key = b.base()
    for step in recipe.steps:
        key = b.step(key, step)
    build_command = ["posttrain", "sandbox", "image", "build", os.path.abspath(recipe.source)]
    img = finish_image(b, recipe, rkey, build_command)
    tmp_index = index.with_name(f".{index.name}.{os.getpid()}")
    tmp_index.write_text(img.digest + "\n")
    tmp_index.replace(index)
    return img


__all__ = ["Builder", "build_rootfs", "layer_dir", "load_recipe", "recipe_key"]
