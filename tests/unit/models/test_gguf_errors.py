"""Bad GGUF input fails before any weights are loaded, as one ModelError line that names the
file and the fix: truncated data, a truncated header, not a GGUF, an unsupported architecture,
no tokenizer, a non-empty --out. A failed conversion leaves nothing behind."""

from __future__ import annotations

import pytest

pytest.importorskip("gguf", reason="needs the gguf package: make install (pip install gguf==0.19.0)")

import posttrain.models.gguf as gguf_mod
from posttrain.errors import ModelError
from posttrain.models.gguf import convert_gguf, inspect_gguf
from posttrain.testing.gguf_tiny import write_tiny_gguf


@pytest.fixture
def no_loading(monkeypatch):
    """Fail the test if conversion gets as far as loading weights."""
    def refuse(*a, **k):
        raise AssertionError("weights were loaded before the input was checked")
    monkeypatch.setattr(gguf_mod, "_load_dense", refuse)


def _cut(src, dst, n):
    dst.write_bytes(src.read_bytes()[:n])
    return dst


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_truncated_tensor_data_is_refused_before_loading(tiny_gguf, tmp_path, no_loading):
    size = tiny_gguf[0].stat().st_size
    bad = _cut(tiny_gguf[0], tmp_path / "cut.gguf", size - 100)
    with pytest.raises(ModelError, match="is truncated") as e:
        convert_gguf(bad, tmp_path / "out")
    msg = _one_line(e)
    assert str(bad) in msg and "100 missing" in msg and "download or copy it again" in msg


def test_truncated_header_is_refused(tiny_gguf, tmp_path):
    bad = _cut(tiny_gguf[0], tmp_path / "head.gguf", 200)
    with pytest.raises(ModelError, match="truncated or corrupt") as e:
        inspect_gguf(bad)
    assert str(bad) in _one_line(e)


@pytest.mark.parametrize("content", [b"", b"GGU", b"PK\x03\x04 a zip file"])
def test_non_gguf_bytes_are_refused(tmp_path, content):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(content)
    with pytest.raises(ModelError, match="is not a GGUF file") as e:
        inspect_gguf(bad)
    assert str(bad) in _one_line(e)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ModelError, match="GGUF file not found"):
        inspect_gguf(tmp_path / "nope.gguf")


def test_unsupported_architecture_is_named_with_the_supported_list(tmp_path, no_loading):
    path = tmp_path / "rwkv.gguf"
    write_tiny_gguf(path, architecture="rwkv6")
    with pytest.raises(ModelError, match="'rwkv6' is not supported") as e:
        convert_gguf(path, tmp_path / "out")
    assert "llama" in _one_line(e) and "gemma3" in str(e.value)


def test_encoder_decoder_architecture_is_not_offered_as_a_causal_lm():
    assert "t5" not in gguf_mod.supported_architectures()
    assert "tokenizer" not in gguf_mod.supported_architectures()


def test_gguf_without_tokenizer_is_refused(tmp_path, no_loading):
    path = tmp_path / "notok.gguf"
    write_tiny_gguf(path, tokenizer=False)
    with pytest.raises(ModelError, match="has no tokenizer"):
        convert_gguf(path, tmp_path / "out")


def test_non_empty_out_is_refused_without_overwrite(tiny_gguf, tmp_path, no_loading):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ModelError, match="not empty; choose a new directory or pass --overwrite"):
        convert_gguf(tiny_gguf[0], out)


def test_overwrite_never_deletes_a_directory_that_is_not_a_model(tiny_gguf, tmp_path, no_loading):
    out = tmp_path / "home"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    with pytest.raises(ModelError, match="not a model directory"):
        convert_gguf(tiny_gguf[0], out, overwrite=True)
    assert (out / "thesis.tex").read_text() == "years of work"


def test_out_that_is_a_file_is_refused(tiny_gguf, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ModelError, match="is a file"):
        convert_gguf(tiny_gguf[0], f, overwrite=True)


def test_unknown_dtype_is_refused(tiny_gguf, tmp_path, no_loading):
    with pytest.raises(ModelError, match="--dtype 'int4'"):
        convert_gguf(tiny_gguf[0], tmp_path / "out", dtype="int4")


def test_a_failed_save_leaves_no_partial_directory(tiny_gguf, tmp_path, monkeypatch):
    def broken(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(gguf_mod, "file_hashes", broken)
    with pytest.raises(OSError):
        convert_gguf(tiny_gguf[0], tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_stray_files_next_to_the_gguf_are_not_read(tiny_gguf, tmp_path):
    # a config.json beside the GGUF must not leak into the converted model
    d = tmp_path / "downloads"
    d.mkdir()
    gguf_path = d / "model.gguf"
    gguf_path.write_bytes(tiny_gguf[0].read_bytes())
    (d / "config.json").write_text('{"model_type": "gpt2", "n_layer": 99}')
    (d / "tokenizer_config.json").write_text('{"chat_template": "WRONG"}')
    convert_gguf(gguf_path, tmp_path / "out")
    assert "WRONG" not in (tmp_path / "out" / "chat_template.jinja").read_text()
    assert '"model_type": "llama"' in (tmp_path / "out" / "config.json").read_text()
