"""The fused sampler draws from the warped softmax: chi-square tests on fixed logits."""

from __future__ import annotations

import torch
from scipy.stats import chisquare

from posttrain.rollout.engines.fast.sampling import RowParams, sample, warp

N = 20000


def _draw(logits: torch.Tensor, temperature=1.0, top_p=1.0, top_k=0) -> torch.Tensor:
    rp = RowParams.build([temperature] * N, [top_p] * N, [top_k] * N, list(range(N)), [0] * N, torch.device("cpu"))
    tok, _ = sample(logits.expand(N, -1).contiguous(), rp, torch.full((N,), 7))
    return torch.bincount(tok, minlength=logits.numel())


def _logits() -> torch.Tensor:
    return torch.randn(12, generator=torch.Generator().manual_seed(0)) * 1.5


def test_temperature_sampling_matches_softmax():
    lg = _logits()
    counts = _draw(lg, temperature=0.7)
    expected = (lg.double() / 0.7).softmax(-1) * N
    assert chisquare(counts.double(), expected).pvalue > 1e-3


def test_top_k_keeps_only_k_most_likely_at_their_renormalised_rates():
    lg = _logits()
    counts = _draw(lg, top_k=4)
    keep = lg.topk(4).indices
    assert counts.sum() == counts[keep].sum()
    assert chisquare(counts[keep].double(), lg[keep].double().softmax(-1) * N).pvalue > 1e-3


def test_top_p_keeps_the_nucleus():
    lg = _logits()
    counts = _draw(lg, top_p=0.6)
    probs, order = lg.softmax(-1).sort(descending=True)
    size = int((probs.cumsum(0) - probs < 0.6).sum())
    nucleus = order[:size]
    assert counts.sum() == counts[nucleus].sum() and (counts[nucleus] > 0).all()


def test_greedy_rows_take_argmax_and_logprobs_are_raw():
    lg = torch.randn(4, 30, generator=torch.Generator().manual_seed(1))
    rp = RowParams.build([0.0, 0.5, 0.0, 2.0], [1.0] * 4, [0] * 4, [1, 2, 3, 4], [0] * 4, torch.device("cpu"))
    tok, lp = sample(lg, rp, torch.zeros(4, dtype=torch.long))
    assert tok[0] == lg[0].argmax() and tok[2] == lg[2].argmax()
    assert torch.allclose(lp, lg.log_softmax(-1).gather(-1, tok[:, None])[:, 0])


def test_warp_masks_outside_top_k_with_minus_inf():
    lg = _logits()[None]
    rp = RowParams.build([1.0], [1.0], [3], [0], [0], torch.device("cpu"))
    assert torch.isinf(warp(lg, rp)).sum() == lg.numel() - 3


def test_uniforms_stay_strictly_inside_zero_and_one_at_the_extreme_hashes():
    from posttrain.rollout.engines.fast.sampling import unit_floats

    bits = torch.tensor([0, 1, 2**9 - 1, 2**9, 2**31, 2**32 - 2**9 - 1, 2**32 - 2**9, 2**32 - 1], dtype=torch.int64)
    u = unit_floats(bits)
    gumbel = -torch.log(-torch.log(u))
    assert bool(((u > 0) & (u < 1)).all()) and bool(torch.isfinite(gumbel).all())


def near_certain_draws(rows: int, vocab: int) -> torch.Tensor:
    """Tokens drawn at temperature 1 where token 0 has all but ~vocab * e^-30 of the mass, in chunks of rows."""
    logits = torch.zeros(vocab)
    logits[0] = 30.0
    out = []
    for start in range(0, rows, 25):
        n = min(25, rows - start)
        rp = RowParams.build([1.0] * n, [1.0] * n, [0] * n, list(range(start, start + n)), [0] * n, torch.device("cpu"))
        out.append(sample(logits.expand(n, -1).contiguous(), rp, torch.full((n,), 3))[0])
    return torch.cat(out)


def test_a_token_with_all_the_mass_is_drawn_at_a_262k_vocabulary():
    # the odds of any other token are 1e-8 a draw; the old 24-bit uniforms drew a hashed column 1.6% of the time
    from posttrain.rollout.engines.fast.sampling import tensor_path

    with tensor_path():
        tok = near_certain_draws(400, 2**18)
    assert int((tok != 0).sum()) == 0
