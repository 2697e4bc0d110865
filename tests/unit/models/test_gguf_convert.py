"""GGUF -> dense HF directory: the converted model computes the same logits as the model the
GGUF encodes, holds no quantisation config, and its manifest hashes every file."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("gguf", reason="needs the gguf package: make install (pip install gguf==0.19.0)")

from posttrain.errors import ModelError
from posttrain.models.catalog import check_model_dir
from posttrain.models.gguf import MANIFEST_NAME, convert_gguf, sha256_file, verify_manifest
from posttrain.testing.gguf_tiny import write_tiny_gguf
from posttrain.models.io import load_policy

PROMPT = "hello there, the world <|im_end|>"


@pytest.fixture(scope="module")
def converted(tiny_gguf, tmp_path_factory):
    path, src = tiny_gguf
    out = tmp_path_factory.mktemp("conv") / "model"
    return out, src, convert_gguf(path, out)


def _logits(model, tok, text=PROMPT):
    ids = tok(text, return_tensors="pt").input_ids  # [1, T]
    with torch.no_grad():
        return ids, model(ids).logits  # [1, T, V]


def test_converted_model_has_the_source_logits(converted):
    out, src, _ = converted
    model, tok = load_policy(out)
    ids, got = _logits(model, tok)
    with torch.no_grad():
        want = src(ids).logits
    assert torch.allclose(got, want, atol=1e-5, rtol=0)


def test_q8_0_gguf_converts_to_its_dequantised_weights(tiny_gguf_q8, tmp_path):
    path, src = tiny_gguf_q8
    convert_gguf(path, tmp_path / "m")
    model, tok = load_policy(tmp_path / "m")
    ids, got = _logits(model, tok)
    with torch.no_grad():
        want = src(ids).logits
    assert torch.allclose(got, want, atol=1e-5, rtol=0)


def test_tokenizer_applies_the_gguf_merges_and_keeps_control_tokens_whole(converted):
    out, _, _ = converted
    _, tok = load_policy(out)
    vocab = tok.get_vocab()
    ids = tok(" the<|im_end|>").input_ids
    assert ids == [vocab["Ġthe"], 2]  # the merge chain Ġ t -> Ġt, Ġt he -> Ġthe; eos id 2 in one piece


def test_output_is_dense_with_no_quantization_config(converted):
    from safetensors import safe_open

    out, _, _ = converted
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float32}


def test_manifest_hashes_every_file_and_the_gguf(converted, tiny_gguf):
    out, _, manifest = converted
    on_disk = {p.name for p in out.iterdir()} - {MANIFEST_NAME}
    assert set(manifest["files"]) == on_disk
    assert all(manifest["files"][n]["sha256"] == sha256_file(out / n) for n in on_disk)
    assert manifest["source"]["gguf_sha256"] == sha256_file(tiny_gguf[0])
    assert json.loads((out / MANIFEST_NAME).read_text()) == manifest


def test_verify_manifest_names_a_changed_file(tiny_gguf, tmp_path):
    out = tmp_path / "m"
    convert_gguf(tiny_gguf[0], out)
    assert verify_manifest(out) == []
    (out / "tokenizer_config.json").write_text("{}")
    assert verify_manifest(out) == ["tokenizer_config.json"]


def test_chat_template_is_carried_over(converted):
    out, _, manifest = converted
    _, tok = load_policy(out)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert manifest["chat_template"] == {"present": True}


def test_base_model_without_template_is_recorded_and_refused_where_chat_is_needed(tmp_path):
    path = tmp_path / "base.gguf"
    write_tiny_gguf(path, chat_template=None)
    manifest = convert_gguf(path, tmp_path / "m")
    assert manifest["chat_template"]["present"] is False and "base model" in manifest["chat_template"]["reason"]
    assert check_model_dir(tmp_path / "m", need_chat_template=False)["chat_template"] is False
    with pytest.raises(ModelError, match="no chat template"):
        check_model_dir(tmp_path / "m", need_chat_template=True)


def test_bfloat16_output_holds_bfloat16_weights(tiny_gguf, tmp_path):
    from safetensors import safe_open

    manifest = convert_gguf(tiny_gguf[0], tmp_path / "m", dtype="bfloat16")
    with safe_open(str(tmp_path / "m" / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
    assert manifest["dtype"] == "bfloat16"


def test_generation_config_carries_the_eos_token(converted):
    out, _, _ = converted
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen["eos_token_id"] == 2


def test_overwrite_replaces_a_previous_conversion(tiny_gguf, tiny_gguf_q8, tmp_path):
    out = tmp_path / "m"
    convert_gguf(tiny_gguf[0], out)
    (out / "stale.txt").write_text("from before")
    manifest = convert_gguf(tiny_gguf_q8[0], out, overwrite=True)
    assert not (out / "stale.txt").exists()
    assert manifest["source"]["gguf"] == tiny_gguf_q8[0].name
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no staging or .old directory left behind
