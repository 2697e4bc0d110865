"""Content-addressed images: stable digests, layers visible read-only, clear spec errors."""

from __future__ import annotations

import zipfile

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox.image_build import build_image


def _wheel(tmp_path, version="1.0"):
    path = tmp_path / f"ptdemo-{version}-py3-none-any.whl"
    di = f"ptdemo-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("ptdemo/__init__.py", f"VERSION = {version!r}\n")
        z.writestr(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: ptdemo\nVersion: {version}\n")
        z.writestr(f"{di}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{di}/RECORD", "")
    return path


def test_files_image_digest_is_stable(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text('files: {"data/words.txt": "alpha\\n"}\n')
    a, b = build_image(spec), build_image(spec)
    spec.write_text('files: {"data/words.txt": "beta\\n"}\n')
    c = build_image(spec)
    assert a.digest == b.digest != c.digest and a.digest.startswith("sha256:")


def test_wheel_layer_importable_and_digest_recorded(tmp_path, exec_):
    _wheel(tmp_path)
    spec = tmp_path / "s.yaml"
    spec.write_text('wheels: ["ptdemo-1.0-py3-none-any.whl"]\nfiles: {"x.txt": "hello"}\n')
    img = build_image(spec)
    r = exec_(["python3", "-c", "import ptdemo; print(ptdemo.VERSION, open('/opt/image/files/x.txt').read())"], image=img.digest)
    assert (r.status, r.stdout, r.image_digest) == ("ok", "1.0 hello\n", img.digest)


def test_image_layer_is_read_only(tmp_path, exec_):
    spec = tmp_path / "s.yaml"
    spec.write_text('files: {"x.txt": "hello"}\n')
    img = build_image(spec)
    r = exec_(["sh", "-c", "echo evil > /opt/image/files/x.txt || echo blocked"], image=img.digest)
    assert r.status == "ok" and "blocked" in r.stdout and (img.layer / "files" / "x.txt").read_text() == "hello"


def test_digest_prefix_resolves(tmp_path, exec_):
    spec = tmp_path / "s.yaml"
    spec.write_text('files: {"p.txt": "prefix"}\n')
    img = build_image(spec)
    r = exec_(["cat", "/opt/image/files/p.txt"], image=img.digest[:19])
    assert (r.status, r.stdout, r.image_digest) == ("ok", "prefix", img.digest)


@pytest.mark.parametrize(
    "text,match",
    [("packages: [requests]\n", "pinned"), ("packages: ['six>=1']\n", "pinned"), ("colour: red\n", "unknown key"),
     ("base: ubuntu\n", "base"), ("wheels: [nope.whl]\n", "wheel"), ("files: [1, 2]\n", "files"), (": : :\n", "YAML")],
)  # fmt: skip
def test_bad_spec_is_named(tmp_path, text, match):
    spec = tmp_path / "bad.yaml"
    spec.write_text(text)
    with pytest.raises(SandboxError, match=match):
        build_image(spec)


def test_missing_spec_file(tmp_path):
    with pytest.raises(SandboxError, match="does not exist"):
        build_image(tmp_path / "nope.yaml")
