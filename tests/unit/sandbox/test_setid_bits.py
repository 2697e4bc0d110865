"""Setuid and setgid bits: kept in image layers, and out of reach of every other host user.

A Debian rootfs ships setuid programs (`su`, `passwd`) and an episode, root in its user
namespace, can make a setuid copy of a shell in its /work. On the host those files are owned
by the sandbox's uid, so whoever could run one would run as that uid and could then write
every image and workspace. The attacker here is `nobody` on the host.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import pytest

from posttrain.sandbox.runtime import SANDBOX_HOST_ID, workspace_root
from posttrain.sandbox.rootfs_store import finalize_tree, images_dir
from posttrain.sandbox.workspace import Workspace

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's host uid exists only when run as root")
NOBODY = 65534


def _as_nobody(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, user=NOBODY, group=NOBODY, extra_groups=[], capture_output=True, text=True, env={})


def test_a_layer_keeps_setuid_and_setgid_bits(tmp_path):
    tree = tmp_path / "tree"
    (tree / "usr/bin").mkdir(parents=True)
    for name, mode in (("su", 0o4755), ("wall", 0o2755), ("ls", 0o755)):
        shutil.copy("/bin/true", tree / "usr/bin" / name)
        os.chmod(tree / "usr/bin" / name, mode)
    finalize_tree(tree)
    got = {p.name: (stat.S_IMODE(p.lstat().st_mode), p.lstat().st_uid) for p in (tree / "usr/bin").iterdir()}
    assert got == {"su": (0o4755, SANDBOX_HOST_ID), "wall": (0o2755, SANDBOX_HOST_ID), "ls": (0o755, SANDBOX_HOST_ID)}


def test_the_image_store_is_closed_to_other_users():
    store = images_dir()
    st = store.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (SANDBOX_HOST_ID, 0o700)
    r = _as_nobody("ls", str(store))
    assert r.returncode != 0 and "Permission denied" in r.stderr


def test_a_setuid_file_in_a_workspace_cannot_be_run_by_another_user():
    ws = Workspace.create(workspace_root(), SANDBOX_HOST_ID)  # the real root: traversable by everyone (0711)
    try:
        planted = ws.path / "bash"
        shutil.copy(shutil.which("bash"), planted)  # what `cp /bin/bash /work/; chmod 4755 /work/bash` leaves
        os.chown(planted, SANDBOX_HOST_ID, SANDBOX_HOST_ID)
        os.chmod(planted, 0o4755)
        r = _as_nobody("/bin/sh", "-c", f"{planted} -p -c 'id -u'")
        assert r.returncode != 0 and str(SANDBOX_HOST_ID) not in r.stdout, (r.stdout, r.stderr)
        assert "Permission denied" in r.stderr
    finally:
        ws.remove()
