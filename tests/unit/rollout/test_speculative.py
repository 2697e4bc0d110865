"""Speculative decoding: greedy output unchanged, sampled output keeps the target distribution."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from tests.unit.rollout.conftest import random_prompts


@pytest.fixture(scope="module")
def sharp():
    """Tiny target and draft with peaked next-token distributions (few likely tokens)."""
    from posttrain.models.tiny import build_tiny

    out = []
    for seed, scale in ((0, 6.0), (1, 4.0)):
        m, tok = build_tiny(seed=seed)
        with torch.no_grad():
            m.model.norm.weight.mul_(scale)
        out.append(m.eval())
    return out[0], out[1], tok


@pytest.mark.parametrize("spec", ["ngram", "draft"])
def test_greedy_speculative_equals_plain_greedy(tiny, spec):
    model, tok = tiny
    draft = model if spec == "ngram" else __import__("posttrain.models.tiny", fromlist=["x"]).build_tiny(seed=1)[0]
    reqs = [GenRequest(p, SamplingParams(temperature=0, max_new_tokens=40)) for p in random_prompts(5, 4, 40, seed=4)]
    plain = FastEngine(model, tok).generate(reqs)
    eng = FastEngine(model, tok, speculative=spec, num_draft=3, draft_model=draft)
    fast = eng.generate(reqs)
    assert [o.token_ids for o in fast] == [o.token_ids for o in plain]
    assert eng.stats()["spec_proposed"] > 0


def _exact_second_token(model, prompt, eos: int) -> torch.Tensor:
    """Law of the 2nd token, with cell V meaning "ended at the 1st (EOS)": enumerate t1."""
    with torch.no_grad():
        p1 = model(torch.tensor([prompt])).logits[0, -1].double().softmax(-1)  # [V]
        V = p1.numel()
        ids = torch.tensor([list(prompt) + [t] for t in range(V)])
        p2 = model(ids).logits[:, -1].double().softmax(-1)  # [V, V]
    cont = p1.clone()
    cont[eos] = 0.0
    return torch.cat([cont @ p2, p1[eos][None]])


def _second_token_counts(model, tok, prompt, n, **kw) -> torch.Tensor:
    eng = FastEngine(model, tok, max_batch=n, **kw)
    outs = eng.generate([GenRequest(prompt, SamplingParams(max_new_tokens=3, n=n, seed=9))])
    second = [o.token_ids[1] if len(o.token_ids) > 1 else len(tok) for o in outs]
    return torch.bincount(torch.tensor(second), minlength=len(tok) + 1).double()


def _pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    exp = probs.double() * counts.sum()
    big = exp >= 5  # pool rare tokens into one cell
    obs = torch.cat([counts[big], counts[~big].sum()[None]])
    ex = torch.cat([exp[big], exp[~big].sum()[None]])
    return chisquare(obs, ex * obs.sum() / ex.sum()).pvalue


@pytest.mark.parametrize("spec", ["ngram", "draft"])
def test_sampled_speculative_keeps_target_distribution(sharp, spec):
    target, draft, tok = sharp
    prompt = tuple(tok.encode("abcabcabcab"))
    counts = _second_token_counts(target, tok, prompt, 3000, speculative=spec, num_draft=2, draft_model=draft)
    exact = _exact_second_token(target, prompt, tok.eos_token_id)
    assert _pvalue(counts, exact) > 1e-3
    # the test has power: the draft's own distribution is rejected against the target's
    assert _pvalue(_second_token_counts(draft, tok, prompt, 3000), exact) < 1e-6
