"""SFT: assistant-only masks, packing with per-sequence attention, grad accumulation, JSONL errors, recipe."""

import copy
import json

import pytest
import torch

from posttrain.config import SFTConfig, TrainerConfig, load_config
from posttrain.errors import TaskFileError
from posttrain.models.tiny import build_tiny
from posttrain.train.chat_data import ChatTemplateMismatch, encode_conversation, load_sft_jsonl
from posttrain.train.packing import batch_logprobs, pack_examples, packed_batch, padded_batch
from posttrain.train.sft import batch_loss, train_encoded
from posttrain.types import Message

SMALL = load_config(None, ["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
                           "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2"]).model.tiny


@pytest.fixture(scope="module")
def tiny():
    return build_tiny(SMALL, seed=0)


def _items(tok, n=6):
    convs = [(Message("user", f"{i}+{i * 7}="), Message("assistant", str(i + i * 7))) for i in range(n)]
    convs.append((Message("system", "be brief"), Message("user", "hi"), Message("assistant", "yo"),
                  Message("user", "2+2="), Message("assistant", "4")))
    return [encode_conversation(tok, c) for c in convs]


def test_mask_covers_exactly_assistant_content_and_end_token(tiny):
    _, tok = tiny
    ids, mask = encode_conversation(tok, (Message("user", "1+1="), Message("assistant", "2")))
    learned = tok.decode([i for i, m in zip(ids, mask) if m], skip_special_tokens=False)
    assert learned == "2<|end|>"
    assert tok.decode(ids, skip_special_tokens=False) == "<|user|>1+1=<|end|><|assistant|>2<|end|>"


def test_every_assistant_turn_is_learned_in_multi_turn(tiny):
    _, tok = tiny
    conv = (Message("user", "hi"), Message("assistant", "yo"), Message("user", "x"), Message("assistant", "ok"))
    ids, mask = encode_conversation(tok, conv)
    assert tok.decode([i for i, m in zip(ids, mask) if m], skip_special_tokens=False) == "yo<|end|>ok<|end|>"


def test_chat_template_mismatch_is_named(tiny):
    _, tok = tiny
    bad = copy.deepcopy(tok)
    bad.chat_template = "{{ messages|length }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    with pytest.raises(ChatTemplateMismatch, match="chat-template mismatch"):
        encode_conversation(bad, (Message("user", "a"), Message("assistant", "b")), "row 3")


def test_packing_keeps_sequences_apart(tiny):
    _, tok = tiny
    rows = pack_examples(_items(tok), max_len=64)
    assert len(rows) < len(_items(tok))  # something was packed
    pb = packed_batch(rows, tok.pad_token_id)
    first = len(rows[0][0][0])
    assert pb.position_ids[0, first] == 0  # positions restart at the second sequence
    assert not pb.attention_mask[0, 0, first, :first].any()  # no attention across sequences
    assert pb.attention_mask[0, 0, first - 1, :first].all()  # causal within the first


def test_packed_loss_equals_unpacked_loss(tiny):
    model, tok = tiny
    items = _items(tok)
    s_pack, n_pack = batch_loss(model, items, tok.pad_token_id, pack=True, max_len=64)
    s_pad, n_pad = batch_loss(model, items, tok.pad_token_id, pack=False, max_len=64)
    assert n_pack == n_pad == sum(sum(m[1:]) for _, m in items)
    assert float(s_pack.detach()) == pytest.approx(float(s_pad.detach()), rel=1e-5)
    per_seq_pad = batch_logprobs(model, padded_batch(items[:1], tok.pad_token_id))
    assert torch.isfinite(per_seq_pad).all()


def test_grad_accumulation_matches_one_big_batch(tiny, monkeypatch):
    # SGD instead of AdamW: Adam's first step is ~lr * sign(g), which amplifies float noise
    monkeypatch.setattr(torch.optim, "AdamW", lambda params, lr, **kw: torch.optim.SGD(params, lr=lr))
    model, tok = tiny
    items = _items(tok)
    cfg = SFTConfig(steps=1, batch_size=8, lr=1e-2, warmup_steps=0, max_len=64, pack=True)
    a, b = copy.deepcopy(model), copy.deepcopy(model)
    train_encoded(a, tok.pad_token_id, items, cfg, TrainerConfig(grad_accum=1), seed=1)
    train_encoded(b, tok.pad_token_id, items, cfg, TrainerConfig(grad_accum=4), seed=1)
    for (n, x), (_, y) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.allclose(x, y, atol=1e-6), n


@pytest.mark.parametrize("line,match", [
    ('{"prompt": "a"}', "completion"),
    ('{"messages": [{"role": "user", "content": "a"}]}', "last message must be from the assistant"),
    ('{"messages": [{"role": "bot", "content": "a"}]}', r"messages\[0\]"),
    ('[1, 2]', "JSON object"),
    ('{"text": "a"}', "needs 'messages'"),
    ('{"prompt": ', "not valid JSON"),
])
def test_bad_jsonl_rows_name_file_line_and_field(tmp_path, line, match):
    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps({"prompt": "ok", "completion": "1"}) + "\n" + line + "\n")
    with pytest.raises(TaskFileError, match=match) as e:
        load_sft_jsonl(p)
    assert f"{p}:2" in str(e.value)


@pytest.mark.slow
def test_sft_recipe_lowers_eval_loss_and_writes_a_loadable_model(tmp_path):
    from posttrain.models import load_policy
    from posttrain.recipes.pipeline import run_recipe

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{a}+{b}=", "completion": str(a + b)}) + "\n"
                            for a in range(10) for b in range(10)))
    cfg = load_config(None, [f"sft.data={data}", "sft.steps=30", "sft.batch_size=16", "sft.eval_every=15",
                             "sft.pack=true", "sft.max_len=64", "sft.lr=1e-2", "threads=1",
                             "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
                             "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2"])
    s = run_recipe("sft", cfg, tmp_path / "run")
    assert s["n_eval"] == 10 and s["n_train"] == 90
    assert s["eval_loss_after"] < 0.6 * s["eval_loss_before"]
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 30 and "eval/loss" in rows[14]
    model, _ = load_policy(s["model"])
    assert model.config.hidden_size == 32


@pytest.mark.parametrize("pack", [False, True])
def test_logprobs_at_the_learned_tokens_only_equal_the_full_vocabulary_pass(tiny, pack):
    """batch_logprobs projects onto the vocabulary only where the loss reads (target_logprobs): the same
    numbers and gradients as the full [R, L-1, V] pass at the learned tokens, 0 elsewhere."""
    from posttrain.train.batching import token_logprobs

    model, tok = tiny
    items = _items(tok)
    pb = packed_batch(pack_examples(items, 64), tok.pad_token_id) if pack else padded_batch(items, tok.pad_token_id)
    kw = {} if pb.position_ids is None else {"position_ids": pb.position_ids}
    full, _ = token_logprobs(model, pb.input_ids, pb.attention_mask, **kw)
    grads = []
    for logp in (batch_logprobs(model, pb), full):
        model.zero_grad()
        (logp * pb.loss_mask).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    kept = batch_logprobs(model, pb).detach()
    assert torch.allclose(kept, full.detach() * pb.loss_mask, atol=1e-6)
    assert (kept[pb.loss_mask == 0] == 0).all()
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*grads))
