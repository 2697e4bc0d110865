"""The last step of an image build: pin its packages, snapshot its WORKDIR, write its manifest.

Both inspections run inside the finished image as the sandbox does (user namespace, no
network): `dpkg-query -W` lists every package as name=version, `id` resolves USER, and
`tar` of WORKDIR gives the tree each episode's workspace starts from.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from posttrain.errors import SandboxError
from posttrain.sandbox.bwrap import rootfs_argv, run_as
from posttrain.sandbox.dockerfile import Recipe
from posttrain.sandbox.images import RootfsImage, images_dir, load_rootfs
from posttrain.sandbox.rootfs_store import finalize_tree, remove_tree

_INSPECT = ("dpkg-query -W -f '${Package}=${Version}\\n'; echo @@USER@@; id -u \"$1\"; id -g \"$1\"")


def _inside(lowers: tuple[Path, ...], workdir: str, cmd: list[str], what: str) -> bytes:
    probe = RootfsImage("", lowers, workdir, (), 0, 0, Path("/"), Path("/"))
    uid = run_as()
    argv = rootfs_argv(cmd, probe, None, {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
    proc = subprocess.run(argv, capture_output=True, user=uid, group=uid, extra_groups=[] if uid is not None else None, env={})
    if proc.returncode != 0:
        raise SandboxError(f"image build: {what} failed inside the image: {proc.stderr.decode(errors='replace').strip()[-200:]}")
    return proc.stdout


def _has(lowers: tuple[Path, ...], rel: str) -> bool:
    return any((lower / rel).is_dir() for lower in lowers)


def finish_image(builder: Any, recipe: Recipe, rkey: str, build_command: list[str]) -> RootfsImage:
    lowers = tuple(layer.tree for layer in builder.layers)
    out = _inside(lowers, "/", ["/bin/sh", "-c", _INSPECT, "sh", builder.user], "dpkg-query/id").decode()
    pkgs_text, _, ids = out.partition("@@USER@@\n")
    packages = dict(line.split("=", 1) for line in sorted(pkgs_text.splitlines()) if "=" in line)
    try:
        uid, gid = (int(x) for x in ids.split())
    except ValueError:
        raise SandboxError(f"{recipe.source}: USER {builder.user!r} does not exist in the image") from None
    digest = "sha256:" + hashlib.sha256(json.dumps({"recipe": rkey, "packages": packages}, sort_keys=True).encode()).hexdigest()
    final = images_dir() / digest.removeprefix("sha256:")
    if (done := load_rootfs(digest)) is not None:  # the same image (recipe and packages) is already whole: never
        return done  # replace a tree that running episodes may be copying from
    tmp = images_dir() / f".build-{digest[7:19]}-{os.getpid()}"
    remove_tree(tmp)
    try:
        tmp.mkdir()
        (tmp / "workdir").mkdir()
        if builder.workdir == "/":  # no WORKDIR: episodes get an empty /work, not the whole root
            builder.workdir = "/work"
        tar = b"" if not builder.layers or builder.workdir == "/work" and not _has(lowers, "work") else _inside(lowers, builder.workdir, ["tar", "-C", builder.workdir, "-cf", "-", "."], "tar of WORKDIR")
        if tar:
            with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
                tf.extractall(tmp / "workdir", filter="tar")
        finalize_tree(tmp / "workdir")
        meta = {
            "digest": digest, "recipe": rkey, "source": recipe.source, "suite": recipe.suite,
            "layers": [{"key": layer.key, "digest": layer.digest} for layer in builder.layers],
            "instructions": [s.text.strip() for s in recipe.steps], "ignored": recipe.ignored,
            "skipped_unreproducible": recipe.skipped, "env": {k: v for k, v in builder.env.items() if k not in ("DEBIAN_FRONTEND", "HOME")},
            "workdir": builder.workdir, "user": {"name": builder.user, "uid": uid, "gid": gid},
            "packages": packages, "build_command": build_command,
            "base_command": json.loads((builder.layers[0].tree.parent / "layer.json").read_text())["instruction"].split()[1:],
        }  # fmt: skip
        (tmp / "image.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
        os.chmod(tmp, 0o755)
        remove_tree(final)
        tmp.rename(final)
    finally:
        remove_tree(tmp)
    img = load_rootfs(digest)
    if img is None:
        raise SandboxError(f"image {digest}: a layer changed while it was being built; build again")
    return img
