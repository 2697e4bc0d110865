"""engine.args.kv_mb: the fast engine's decode lanes stay within their KV budget.

Lanes are dense and share one length, so one long prompt in a batch would size every lane
to it; the engine runs such a batch in phases (shortest requests first) instead.
"""

from __future__ import annotations

import pytest

from posttrain.errors import ConfigError
from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from tests.unit.rollout.conftest import random_prompts


def mixed_batch() -> list[GenRequest]:
    """Seven 8-token prompts and one of 120, 4 greedy samples of 8 tokens each."""
    prompts = random_prompts(7, 8, 8, seed=4) + random_prompts(1, 120, 120, seed=5)
    return [GenRequest(p, SamplingParams(temperature=0, max_new_tokens=8, n=4), id=str(i)) for i, p in enumerate(prompts)]


def budget_for(tiny, tokens: int) -> float:
    """kv_mb that holds `tokens` lane positions of the tiny model's K and V."""
    return tokens * FastEngine(*tiny).kv_token_bytes / 2**20


def test_a_long_prompt_does_not_size_every_lane(tiny):
    eng = FastEngine(*tiny, kv_mb=budget_for(tiny, 32 * 40))  # 32 lanes of 40 fit; 32 of 130 do not
    seen = []
    real = eng.lm.new_lanes
    eng.lm.new_lanes = lambda n, cap: seen.append(n * cap) or real(n, cap)
    eng.generate(mixed_batch())
    assert seen and max(seen) <= 32 * 40


def test_phased_batch_gives_the_unbudgeted_tokens(tiny):
    budgeted = FastEngine(*tiny, kv_mb=budget_for(tiny, 32 * 40)).generate(mixed_batch())
    whole = FastEngine(*tiny).generate(mixed_batch())
    assert [c.token_ids for c in budgeted] == [c.token_ids for c in whole]
    assert [(c.request_id, c.index) for c in budgeted] == [(c.request_id, c.index) for c in whole]


def test_a_request_larger_than_the_budget_still_runs_in_one_lane(tiny):
    eng = FastEngine(*tiny, kv_mb=budget_for(tiny, 10))
    seen = []
    real = eng.lm.new_lanes
    eng.lm.new_lanes = lambda n, cap: seen.append(n) or real(n, cap)
    out = eng.generate(mixed_batch()[-1:])
    assert all(c.finish_reason != "error" and len(c.token_ids) == 8 for c in out) and set(seen) == {1}


def test_lanes_over_a_quarter_of_the_budget_are_freed_between_calls(tiny):
    """An RL update runs between two generate calls and needs that memory."""
    big = FastEngine(*tiny, kv_mb=budget_for(tiny, 32 * 140))
    small = FastEngine(*tiny, kv_mb=budget_for(tiny, 32 * 140 * 100))
    big.generate(mixed_batch()), small.generate(mixed_batch())
    assert big.lanes is None and small.lanes is not None


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "4096"])
def test_a_bad_budget_is_refused_by_name(tiny, bad):
    with pytest.raises(ConfigError, match="engine.args.kv_mb"):
        FastEngine(*tiny, kv_mb=bad)
