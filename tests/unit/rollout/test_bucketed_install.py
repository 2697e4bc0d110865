"""A sync in buckets (weight_sync.BucketedInstall, what a sharded trainer sends): the engine
takes the new weights only once every tensor came, verified, and never generates from a
half-installed state."""

from __future__ import annotations

import pytest
import torch

from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from posttrain.rollout.weight_sync import MergedInstall, WeightSyncError, begin_weights, manifest


def _state(model, seed):
    g = torch.Generator().manual_seed(seed)
    out = {k: v + 0.05 * torch.randn(v.shape, generator=g) for k, v in model.state_dict().items()}
    out["lm_head.weight"] = out["model.embed_tokens.weight"]  # the tiny model ties its head
    return out


def _buckets(state, n):
    names = list(state)
    return [{k: state[k] for k in names[i::n]} for i in range(n)]


def test_every_bucket_lands_in_the_engine_and_the_version_moves_at_finish(tiny):
    model, tok = tiny
    eng, state = FastEngine(model, tok), _state(model, 0)
    sync = begin_weights(eng, 3)
    for b in _buckets(state, 4):
        sync.add(b, manifest(b, 3))
        assert eng.weights_version == -1  # mid-sync: not the old weights, not yet the new
    rep = sync.finish()
    assert eng.weights_version == 3 and rep.tensors == len(eng._views)
    assert all(torch.equal(v, state[k].to(v.dtype)) for k, v in eng._views.items())


def test_a_sync_missing_a_tensor_never_commits(tiny):
    model, tok = tiny
    eng, state = FastEngine(model, tok), _state(model, 1)
    state.pop("model.norm.weight")
    sync = begin_weights(eng, 2)
    sync.add(state)
    with pytest.raises(WeightSyncError, match="model.norm.weight"):
        sync.finish()
    with pytest.raises(WeightSyncError, match="reload"):
        eng.generate([GenRequest((20, 21), SamplingParams(max_new_tokens=2))])  # lock released, refuses


def test_a_bucket_corrupted_in_transit_is_named_and_aborts_the_sync(tiny):
    model, tok = tiny
    eng, state = FastEngine(model, tok), _state(model, 2)
    first, second = _buckets(state, 2)
    sync = begin_weights(eng, 5)
    sync.add(first, manifest(first, 5))
    sent = manifest(second, 5)
    name = next(k for k in second if k.endswith("down_proj.weight"))
    second[name] = second[name].clone()
    second[name][1, 2] += 1e-3
    with pytest.raises(WeightSyncError, match="down_proj"):
        sync.add(second, sent)
    eng.load_weights(model.state_dict(), 6)  # the lock is free again: a full reload recovers
    assert eng.weights_version == 6


def test_a_tensor_sent_twice_or_unknown_is_refused(tiny):
    model, tok = tiny
    eng, state = FastEngine(model, tok), _state(model, 3)
    sync = begin_weights(eng, 1)
    sync.add({"model.norm.weight": state["model.norm.weight"]})
    with pytest.raises(WeightSyncError, match="twice"):
        sync.add({"model.norm.weight": state["model.norm.weight"]})
    sync = begin_weights(eng, 1)
    with pytest.raises(WeightSyncError, match="no tensor model.extra"):
        sync.add({"model.extra.weight": torch.zeros(2)})


def test_a_tied_head_that_differs_from_the_embedding_is_refused(tiny):
    model, tok = tiny
    eng, state = FastEngine(model, tok), _state(model, 4)
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0
    head = {"lm_head.weight": state.pop("lm_head.weight")}
    sync = begin_weights(eng, 1)
    sync.add(head)  # before its embedding: checked once the embedding is in
    with pytest.raises(WeightSyncError, match="tied"):
        sync.add(state)


def test_an_engine_without_views_gets_the_buckets_merged(tiny):
    class Plain:
        def __init__(self):
            self.loaded = None

        def load_weights(self, state, version, manifest=None):
            self.loaded = (dict(state), version, manifest)

    model, _ = tiny
    eng, state = Plain(), _state(model, 5)
    sync = begin_weights(eng, 4)
    assert isinstance(sync, MergedInstall) and sync.full_copy
    for b in _buckets(state, 3):
        sync.add(b, manifest(b, 4))
    sync.finish()
    got, version, man = eng.loaded
    assert version == 4 and set(got) == set(state) and set(man) == set(state)
