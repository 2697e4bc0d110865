"""One model cache, one environment variable: `quickstart --model NAME` and `serve --model NAME` both
find catalog models in $POSTTRAIN_MODELS_DIR/NAME (models/catalog.py catalog_model_dir)."""

import pytest

from posttrain.errors import ConfigError, ModelError
from posttrain.models.catalog import catalog_model_dir, models_home


def test_the_models_home_is_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_MODELS_DIR", str(tmp_path))
    assert models_home() == tmp_path


def test_a_converted_catalog_model_is_found_under_the_models_home(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_MODELS_DIR", str(tmp_path))
    (tmp_path / "smollm2-135m-instruct").mkdir()
    (tmp_path / "smollm2-135m-instruct" / "config.json").write_text("{}")
    assert catalog_model_dir("smollm2-135m-instruct", convert=False) == tmp_path / "smollm2-135m-instruct"


def test_an_unconverted_model_says_where_it_would_go(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_MODELS_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match=f"--out {tmp_path / 'smollm2-135m-instruct'}"):
        catalog_model_dir("smollm2-135m-instruct", convert=False)


def test_an_unknown_name_lists_the_catalog(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_MODELS_DIR", str(tmp_path))
    with pytest.raises(ModelError, match="known: .*smollm2-135m-instruct"):
        catalog_model_dir("no-such-model")


def test_serve_loads_catalog_models_from_the_same_home(tmp_path, monkeypatch):
    from posttrain.serve.server import load_served_model

    monkeypatch.setenv("POSTTRAIN_MODELS_DIR", str(tmp_path))
    monkeypatch.setenv("POSTTRAIN_MODEL_CACHE", str(tmp_path / "elsewhere"))  # the old, undocumented name: ignored
    (tmp_path / "smollm2-135m-instruct").mkdir()  # a directory without weights: loading it fails, naming where
    (tmp_path / "smollm2-135m-instruct" / "config.json").write_text("{}")
    with pytest.raises(ModelError, match=f"cannot load model from {tmp_path / 'smollm2-135m-instruct'}"):
        load_served_model("smollm2-135m-instruct")
