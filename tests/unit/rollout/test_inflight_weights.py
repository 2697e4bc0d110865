"""In-flight weight updates (rl.partial_rollouts): the fast engine takes new weights between
decode steps without stopping the batch, and tags every token with the version it was sampled under.
"""

from __future__ import annotations

import copy

import pytest
import torch

from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from posttrain.rollout.weight_sync import WeightSyncError
from tests.unit.rollout.conftest import random_prompts

NEW = 16  # tokens per sample


def _reqs(n_req: int = 2, n: int = 2) -> list[GenRequest]:
    return [GenRequest(p, SamplingParams(temperature=1.0, max_new_tokens=NEW, n=n, seed=11 + i), id=str(i))
            for i, p in enumerate(random_prompts(n_req, 6, 10, seed=3))]


def _after(polls: int, version: int, state):
    """A weight source that offers (version, state) from its `polls`-th poll on."""
    calls = {"n": 0}

    def source():
        calls["n"] += 1
        return (version, state) if calls["n"] > polls else None

    return source


def _perturbed(model) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    out = {k: v + 0.5 * torch.randn(v.shape, generator=g) for k, v in model.state_dict().items()}
    if "lm_head.weight" in out:  # the tiny model ties its head to the embedding
        out["lm_head.weight"] = out["model.embed_tokens.weight"]
    return out


def test_same_weights_under_a_new_version_leave_every_token_unchanged_and_tag_the_split(tiny):
    base = FastEngine(*tiny, ignore_eos=True).generate(_reqs())
    eng = FastEngine(*tiny, ignore_eos=True)
    eng.set_weight_source(_after(5, 1, tiny[0].state_dict()))
    outs = eng.generate(_reqs())
    assert [c.token_ids for c in outs] == [c.token_ids for c in base]  # the batch was not stopped or restarted
    assert [x for c in outs for x in c.logprobs] == pytest.approx([x for c in base for x in c.logprobs], abs=1e-5)
    for c in outs:
        j = c.token_versions.index(1)
        assert 0 < j < NEW and c.token_versions == (0,) * j + (1,) * (NEW - j)
    assert eng.weights_version == 1 and eng.stats()["inflight_updates"] == 1


def test_tokens_after_an_update_are_sampled_under_the_new_weights(tiny):
    base = FastEngine(*tiny, ignore_eos=True).generate(_reqs())
    eng = FastEngine(*tiny, ignore_eos=True)
    eng.set_weight_source(_after(5, 1, _perturbed(tiny[0])))
    outs = eng.generate(_reqs())
    for c, b in zip(outs, base):
        j = c.token_versions.index(1)
        assert c.token_ids[:j] == b.token_ids[:j]  # before the update: the old weights' samples
        assert list(c.logprobs[:j]) == pytest.approx(list(b.logprobs[:j]), abs=1e-5)
        assert list(c.logprobs[j:]) != pytest.approx(list(b.logprobs[j:]), abs=1e-3)  # after it: another distribution


def test_a_sample_admitted_after_the_update_is_the_new_weights_run_from_scratch(tiny):
    new_state = _perturbed(tiny[0])
    fresh_model = copy.deepcopy(tiny[0])
    fresh_model.load_state_dict(new_state)
    want = FastEngine(fresh_model, tiny[1], ignore_eos=True, max_batch=1).generate(_reqs(2, 1))[1]
    eng = FastEngine(*tiny, ignore_eos=True, max_batch=1)  # one lane: request 1 waits for request 0
    eng.set_weight_source(_after(3, 1, new_state))
    first, second = eng.generate(_reqs(2, 1))
    assert 1 in first.token_versions and 0 in first.token_versions  # request 0 spans the update
    assert second.token_versions == (1,) * NEW  # its prompt's KV was recomputed, not the stale cache
    assert second.token_ids == want.token_ids
    assert list(second.logprobs) == pytest.approx(list(want.logprobs), abs=1e-5)


def test_an_update_offering_a_version_not_newer_is_ignored(tiny):
    eng = FastEngine(*tiny, ignore_eos=True)
    eng.load_weights(tiny[0].state_dict(), 3)
    eng.set_weight_source(lambda: (2, _perturbed(tiny[0])))
    outs = eng.generate(_reqs())
    assert all(c.token_versions == (3,) * NEW for c in outs) and eng.stats()["inflight_updates"] == 0


def test_a_bad_state_from_the_source_fails_the_call_and_the_engine_refuses_to_go_on(tiny):
    eng = FastEngine(*tiny, ignore_eos=True)
    bad = dict(tiny[0].state_dict())
    bad.pop(next(iter(bad)))
    eng.set_weight_source(_after(2, 1, bad))
    with pytest.raises(WeightSyncError):
        eng.generate(_reqs())
    eng.set_weight_source(None)
    with pytest.raises(WeightSyncError, match="invalid after a failed sync"):
        eng.generate(_reqs())


def test_a_sequence_spanning_two_versions_is_not_put_in_the_prefix_cache(tiny):
    req = [GenRequest(random_prompts(1, 8, 8, seed=9)[0], SamplingParams(max_new_tokens=NEW), id="a")]
    control = FastEngine(*tiny, ignore_eos=True)
    control.generate(req)
    assert control.store.cached_blocks > 0  # a finished turn is cached for its continuation...
    eng = FastEngine(*tiny, ignore_eos=True)
    eng.set_weight_source(_after(4, 1, tiny[0].state_dict()))
    eng.generate(req)
    assert eng.store.cached_blocks == 0  # ...unless its KV was made under two weights versions
