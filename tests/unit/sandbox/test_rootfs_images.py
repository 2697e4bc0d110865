"""Debian-rootfs images: pinned manifests, stable digests, reuse, corruption and failed builds."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox.images import forget_checks, images_dir, load_rootfs, resolve
from posttrain.sandbox.rootfs_build import build_rootfs
from posttrain.sandbox.rootfs_store import store_dir

from tests.unit.sandbox.conftest import IMAGE_CTX
from posttrain.testing.cli_fork import run_cli

HEAD = Path(IMAGE_CTX, "Dockerfile").read_text().split("WORKDIR")[0]  # the shared base + apt layer


def _variant(tmp_path, tail: str) -> Path:
    p = tmp_path / "Dockerfile"
    p.write_text(HEAD + tail)
    return p


def test_manifest_pins_every_package_and_records_the_build(debian_image):
    meta = json.loads(debian_image.manifest.read_text())
    for pkg in ("jq", "git", "python3", "dpkg", "bash"):
        assert meta["packages"].get(pkg), pkg  # name -> exact version, from dpkg-query -W inside the image
    assert meta["suite"] == "bookworm" and meta["workdir"] == "/app" and meta["env"]["GREETING"] == "hi"
    assert len(meta["layers"]) == 4 and all(layer["digest"].startswith("sha256:") for layer in meta["layers"])
    assert meta["build_command"][:4] == ["posttrain", "sandbox", "image", "build"] and meta["base_command"][0] == "mmdebstrap"
    assert meta["ignored"] == ["8: LABEL purpose=tests"]


def test_rebuild_is_a_reuse_with_the_same_digest(debian_image):
    again = build_rootfs(Path(IMAGE_CTX, "Dockerfile"))
    assert again.digest == debian_image.digest and again.lowers == debian_image.lowers


def test_cli_build_prints_the_digest(debian_image):
    out = run_cli(["sandbox", "image", "build", str(Path(IMAGE_CTX, "Dockerfile"))],
                         timeout=120)
    assert out.returncode == 0 and out.stdout.split()[0] == debian_image.digest


def test_a_corrupted_layer_is_detected_and_rebuilt(debian_image, tmp_path):
    img = build_rootfs(_variant(tmp_path, "RUN echo v1 > /opt/marker\n"))
    marker = img.lowers[-1] / "opt" / "marker"
    marker.write_text("tampered\n")
    forget_checks()  # a layer is checked once per process: look again, as the next process would
    assert load_rootfs(img.digest) is None  # its digest no longer matches: the bad layer is removed
    again = build_rootfs(_variant(tmp_path, "RUN echo v1 > /opt/marker\n"))
    assert again.digest == img.digest and marker.read_text() == "v1\n"


def test_verify_recomputes_content_digests(debian_image, tmp_path):
    img = build_rootfs(_variant(tmp_path, "RUN echo v2 > /opt/marker2\n"))
    marker = img.lowers[-1] / "opt" / "marker2"
    st = os.stat(marker)
    marker.write_text("v3\n")  # same size, mtime put back: only the content digest can tell
    os.utime(marker, ns=(st.st_atime_ns, st.st_mtime_ns))
    forget_checks()
    assert load_rootfs(img.digest) is not None and load_rootfs(img.digest, full_check=True) is None


def test_a_failing_run_names_line_and_log_and_leaves_nothing(debian_image, tmp_path):
    before = set(store_dir("layers").iterdir())
    with pytest.raises(SandboxError, match=r"Dockerfile:6: 'RUN echo partial > /x && exit 3' failed \(exit 3\).*; log: /\S+\.log$") as e:
        build_rootfs(_variant(tmp_path, "WORKDIR /app\nRUN echo partial > /x && exit 3\n"))
    log = Path(str(e.value).rsplit("log: ", 1)[1])
    assert log.is_file() and "exit 3" in log.read_text()
    new = set(store_dir("layers").iterdir()) - before
    assert all(not p.name.startswith(".tmp") for p in new) and not list(images_dir().glob(".build-*"))


def test_a_package_apt_cannot_find_is_named(debian_image, tmp_path):
    with pytest.raises(SandboxError, match=r"Dockerfile:5: .* apt cannot find package 'no-such-package-pt'; log: "):
        build_rootfs(_variant(tmp_path, "RUN apt-get update -q && apt-get install -y no-such-package-pt\n"))


def test_resolve_names_the_image_and_its_workdir(debian_image):
    img = resolve(debian_image.digest[:20])
    assert img.digest == debian_image.digest and img.rootfs is not None and img.rootfs.workdir == "/app"


def _dead_pid() -> int:
    import subprocess

    p = subprocess.Popen(["true"])
    p.wait()  # reaped: its pid names no process now
    return p.pid


def test_gc_keeps_used_layers_and_drops_a_dead_builds_partials(debian_image):
    from posttrain.sandbox.rootfs_store import gc

    junk = store_dir("layers") / f".tmp-deadbeef-{_dead_pid()}"
    junk.mkdir(exist_ok=True)
    removed = gc()
    assert not junk.exists() and removed["partial"] >= 1
    assert load_rootfs(debian_image.digest) is not None


def test_gc_leaves_a_running_builds_partial_tree_alone(debian_image):
    import subprocess

    from posttrain.sandbox.rootfs_store import gc

    builder = subprocess.Popen(["sleep", "30"])
    try:
        partial = images_dir() / f".build-0123456789ab-{builder.pid}"
        partial.mkdir()
        gc()
        assert partial.is_dir()
    finally:
        builder.kill()
        builder.wait()
    gc()
    assert not partial.exists()


def test_gc_leaves_an_image_alone_while_an_episode_runs_on_it(debian_image):
    from posttrain.sandbox.rootfs_store import gc
    from posttrain.sandbox.session import ShellSession
    from posttrain.types import ExecLimits

    others = {json.loads(m.read_text())["digest"] for m in images_dir().glob("*/image.json")} - {debian_image.digest}
    session = ShellSession(resolve(debian_image.digest), ExecLimits()).start_blocking()
    try:
        removed = gc(keep_digests=others)  # only this image is garbage, and an episode holds it
        assert removed["skipped"] == 1 and removed["images"] == 0
        assert load_rootfs(debian_image.digest) is not None
        assert all(p.is_dir() for p in debian_image.lowers)
    finally:
        asyncio.run(session.close())


def test_copy_follows_docker_destination_rules(debian_image, tmp_path, runner, pools):
    (tmp_path / "one.txt").write_text("1\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "inner.txt").write_text("2\n")
    img = build_rootfs(_variant(tmp_path, "WORKDIR /srv\nCOPY one.txt .\nCOPY one.txt /etc/two.txt\nCOPY d /srv/copied/\n"))
    r = runner.run(pools("pooled").exec(["sh", "-c", "cat one.txt /etc/two.txt copied/inner.txt; pwd"], image=img.digest))
    assert (r.status, r.stdout) == ("ok", "1\n1\n2\n/srv\n")
