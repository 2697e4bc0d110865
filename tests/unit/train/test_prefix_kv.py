"""The prefix-K/V update layout gives the plain layout's logprobs, entropies and gradients.

Tolerance: fp32 throughout; logprobs and entropies within 1e-5 absolute, gradients within
1e-5 absolute + 1e-4 relative (the two layouts sum the same terms in a different order).
"""

from __future__ import annotations

import pytest
import torch

from posttrain.config import RLConfig
from posttrain.train.batching import pack_trajectories, token_logprobs
from posttrain.train.losses import entropy_from_logits
from posttrain.train.prefix_kv import PrefixKVBatch, prefix_kv_batch, shared_layout, split_passes
from posttrain.train.shared_prefix import SharedBatch
from posttrain.train.update import policy_logprobs
from posttrain.types import Trajectory, Turn

PROMPTS = [(5, 6, 7, 8), (9, 10), (11, 12, 13, 14, 15, 16)]
SIZES = ((0, 3), (0, 5), (0, 1), (0, 7), (1, 4), (1, 2), (1, 6), (2, 6))


@pytest.fixture(scope="module")
def tiny():
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(seed=0)
    return model.eval(), tok.pad_token_id


def llama(attn: str = "sdpa"):
    """A random-init small HF Llama with grouped-query attention (4 heads, 2 KV heads)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64, rope_theta=10000.0, pad_token_id=0,
                      attn_implementation=attn)
    torch.manual_seed(1)
    return LlamaForCausalLM(cfg).eval()


def trajs(sizes=SIZES):
    """Trajectories over three prompts (the third alone), tails of different lengths, one of
    them three turns (an assistant turn, an untrained observation, an assistant turn)."""
    out = []
    for k, (p, n) in enumerate(sizes):
        toks = tuple(20 + (k * 7 + j) % 30 for j in range(n))
        turns = (Turn("assistant", "", toks, (0.0,) * n),)
        if k == 1:
            turns += (Turn("tool", "", (40, 41), (), trainable=False), Turn("assistant", "", (42,), (0.0,)))
        out.append(Trajectory(f"t{p}", "v", "d", PROMPTS[p], turns, group=p, sample=k))
    return out


def plain_and_kv(model, pad: int, ts, **kw):
    tb = pack_trajectories(ts, pad)
    plain, logits = token_logprobs(model, tb.input_ids, tb.attention_mask, with_logits=True)
    kv, ent = prefix_kv_batch(ts, tb.loss_mask.shape[1], pad, **kw).logprobs(model)
    return tb.loss_mask, plain, entropy_from_logits(logits), kv, ent


def grads(model, fn, weights):
    model.zero_grad()
    (fn() * weights).sum().backward()
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def assert_same_grads(model, pad: int, ts, **kw):
    tb = pack_trajectories(ts, pad)
    w = torch.randn(tb.loss_mask.shape, generator=torch.Generator().manual_seed(0)) * tb.loss_mask
    a = grads(model, lambda: token_logprobs(model, tb.input_ids, tb.attention_mask)[0], w)
    b = grads(model, lambda: prefix_kv_batch(ts, tb.loss_mask.shape[1], pad, pass_tokens=0, **kw).logprobs(model)[0], w)
    assert len(a) == len(b) > 0
    assert all(torch.allclose(x, y, atol=1e-5, rtol=1e-4) for x, y in zip(a, b))


@pytest.mark.parametrize("pass_tokens", [1e9, 0.0])  # one pass; one pass per distinct length
def test_logprobs_match_the_plain_layout(tiny, pass_tokens):
    with torch.no_grad():
        m, plain, _, kv, _ = plain_and_kv(*tiny, trajs(), pass_tokens=pass_tokens)
    assert torch.allclose(plain * m, kv * m, atol=1e-5)


def test_entropies_match_the_plain_layout(tiny):
    with torch.no_grad():
        m, _, ent_plain, _, ent = plain_and_kv(*tiny, trajs(), pass_tokens=0.0)
    assert torch.allclose(ent_plain * m, ent * m, atol=1e-5)


def test_gradients_match_the_plain_layout(tiny):
    """The prompt runs once: its gradient is the sum over the group's completions."""
    assert_same_grads(*tiny, trajs())


def test_logprobs_match_on_a_gqa_llama_with_eager_attention():
    """Eager attention adds the mask to the scores: the layout hands it 0 / dtype-min, not booleans."""
    model = llama("eager")
    with torch.no_grad():
        m, plain, _, kv, _ = plain_and_kv(model, 0, trajs(), pass_tokens=0.0)
    assert torch.allclose(plain * m, kv * m, atol=1e-5)


def test_gradients_match_on_a_gqa_llama():
    assert_same_grads(llama(), 0, trajs())


def test_lora_gradients_match_through_peft():
    from posttrain.config import LoraConfig, TrainerConfig
    from posttrain.train.lora import prepare_model

    model = prepare_model(llama(), TrainerConfig(lora=LoraConfig(target_modules=["q_proj", "v_proj"])), 0)
    for n, p in model.named_parameters():  # peft starts B at zero: make the adapters matter
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.1)
    assert_same_grads(model, 0, trajs())


def test_the_prompt_runs_once_and_completions_run_without_it(tiny):
    model, pad = tiny
    ts = trajs(tuple((0, 6) for _ in range(8)))
    seen = []
    hook = model.get_input_embeddings().register_forward_hook(lambda mod, args, out: seen.append(args[0].clone()))
    try:
        with torch.no_grad():
            prefix_kv_batch(ts, 32, pad, pass_tokens=1e9).logprobs(model)
    finally:
        hook.remove()
    prompt_rows, tail_rows = seen
    assert prompt_rows.tolist() == [list(PROMPTS[0])]
    assert tail_rows.shape == (8, 9)  # 8 completions of 6 tokens, the two-turn one 6 + 3


def test_an_empty_completion_contributes_nothing(tiny):
    ts = trajs(((0, 3), (0, 4), (0, 0)))  # sample 2 has no tokens
    with torch.no_grad():
        m, plain, _, kv, _ = plain_and_kv(*tiny, ts)
    assert torch.allclose(plain * m, kv * m, atol=1e-5) and kv[2].abs().sum() == 0


def test_nothing_shared_means_the_plain_layout():
    assert prefix_kv_batch(trajs(((0, 3), (1, 2), (2, 4))), 16, 0) is None


def test_passes_cover_every_row_in_order():
    lens = sorted([9, 9, 8, 7, 7, 5, 3, 3, 2, 1] * 5, reverse=True)
    cuts = split_passes(lens, prefix=4, keys_per_token=100.0, pass_tokens=0.0, max_passes=4)
    assert cuts[0] == 0 and cuts[-1] == len(lens) and cuts == sorted(set(cuts)) and len(cuts) == 5


def test_a_costly_pass_means_one_pass():
    lens = sorted(range(1, 40), reverse=True)
    assert split_passes(lens, prefix=4, keys_per_token=100.0, pass_tokens=1e9) == [0, len(lens)]


def test_gradient_checkpointing_falls_back_to_the_dense_layout():
    """HF drops the KV cache inside checkpointed layers, so the prefix could not be read."""
    model = llama()
    model.activation_checkpointing_enable()
    sb = shared_layout("kv", model, trajs(), 16, 0)
    assert isinstance(sb, SharedBatch) and isinstance(shared_layout("kv", llama(), trajs(), 16, 0), PrefixKVBatch)


def test_the_two_shared_layouts_agree_through_the_update_path(tiny):
    model, pad = tiny
    ts = trajs()
    tb = pack_trajectories(ts, pad)
    with torch.no_grad():
        kv = policy_logprobs(model, ts, tb, pad, RLConfig(prefix_layout="kv"))[0]
        dense = policy_logprobs(model, ts, tb, pad, RLConfig(prefix_layout="dense"))[0]
    assert torch.allclose(kv * tb.loss_mask, dense * tb.loss_mask, atol=1e-5)


def test_auto_picks_kv_for_long_groups_and_dense_for_tiny_ones(tiny):
    """The dense layout's attention grows with (G L)^2; kv's extra forwards cost a fixed amount."""
    model, pad = tiny
    long = trajs(tuple((p, 80) for p in (0, 1) for _ in range(16)))
    short = trajs(((0, 2), (0, 2)))
    assert isinstance(shared_layout("auto", model, long, 128, pad), PrefixKVBatch)
    assert isinstance(shared_layout("auto", model, short, 16, pad), SharedBatch)


def test_an_unknown_layout_is_refused_by_the_config():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="prefix_layout"):
        RLConfig(prefix_layout="flash")


LONG = tuple(30 + j % 30 for j in range(40))  # a 40-token prompt among prompts of 2 and 4


def with_long_prompt():
    out = trajs(((0, 3), (0, 5), (1, 4), (1, 2)))
    return out + [Trajectory("tl", "v", "d", LONG, (Turn("assistant", "", (21 + k, 22, 23), (0.0,) * 3),), group=9,
                             sample=k) for k in range(2)]


def test_a_long_prompt_runs_in_its_own_prompt_pass(tiny):
    """Left-padding every prompt to the longest would run the short ones at 40 tokens each."""
    model, pad = tiny
    ts = with_long_prompt()
    seen = []
    hook = model.get_input_embeddings().register_forward_hook(lambda mod, args, out: seen.append(args[0].shape))
    try:
        with torch.no_grad():
            prefix_kv_batch(ts, 48, pad, pass_tokens=10.0).logprobs(model)
    finally:
        hook.remove()
    wide = [tuple(s) for s in seen if s[1] >= len(LONG)]  # every tail is at most 5 tokens wide
    assert wide == [(1, len(LONG))]


def test_logprobs_match_the_plain_layout_with_a_long_prompt(tiny):
    with torch.no_grad():
        m, plain, _, kv, _ = plain_and_kv(*tiny, with_long_prompt(), pass_tokens=10.0)
    assert torch.allclose(plain * m, kv * m, atol=1e-5)


def test_recomputed_passes_give_the_same_gradients(tiny):
    """recompute=0: every pass keeps no activations and backward runs its forward again."""
    assert_same_grads(*tiny, trajs(), recompute=0.0)


def saved_bytes(model, pad, ts, **kw) -> int:
    """Bytes autograd keeps for backward over one forward of the layout."""
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        prefix_kv_batch(ts, 32, pad, pass_tokens=0, **kw).logprobs(model)
    return total[0]


def test_recomputed_passes_keep_less_for_backward(tiny):
    model, pad = tiny
    ts = trajs()
    assert saved_bytes(model, pad, ts, recompute=0.0) < saved_bytes(model, pad, ts) / 3
