"""Weight sync is versioned and verified; corruption is detected; stale KV is dropped."""

from __future__ import annotations

import pytest
import torch

from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from posttrain.rollout.weight_sync import WeightSyncError, manifest
from tests.unit.rollout.conftest import hf_logprobs, random_prompts


def _perturbed_state(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {k: v + 0.05 * torch.randn(v.shape, generator=g) for k, v in model.state_dict().items()}


def test_load_weights_installs_new_version_and_drops_stale_kv(tiny):
    model, tok = tiny
    eng = FastEngine(model, tok)
    prompt = random_prompts(1, 40, 40, seed=13)[0]
    eng.generate([GenRequest(prompt, SamplingParams(max_new_tokens=4))])
    assert eng.store.cached_blocks > 0
    new = type(model)(model.config).eval()
    new.load_state_dict(_perturbed_state(model))
    rep = eng.load_weights(new.state_dict(), version=7)
    assert eng.weights_version == 7 and rep.tensors > 0 and eng.store.cached_blocks == 0
    out = eng.generate([GenRequest(prompt, SamplingParams(max_new_tokens=16, seed=1))])[0]
    assert (hf_logprobs(new, prompt, out.token_ids) - torch.tensor(out.logprobs)).abs().max() < 1e-4


def test_tensor_corrupted_in_transit_is_detected(tiny):
    model, tok = tiny
    eng = FastEngine(model, tok)
    state = _perturbed_state(model, 1)
    sent = manifest(state, version=3)  # the trainer's digests, computed before sending
    state["model.layers.1.mlp.down_proj.weight"][5, 7] += 1e-3  # flipped on the way
    with pytest.raises(WeightSyncError, match="down_proj"):
        eng.load_weights(state, version=3, manifest=sent)
    with pytest.raises(WeightSyncError, match="reload"):
        eng.generate([GenRequest((20, 21))])  # half-installed weights are never used
    eng.load_weights(model.state_dict(), version=4)  # the fallback: a full reload
    assert eng.weights_version == 4


def test_wrong_tensor_in_a_slot_is_detected(tiny):
    model, tok = tiny
    eng = FastEngine(model, tok)
    view = eng.lm.views["model.layers.0.self_attn.k_proj.weight"]
    state = _perturbed_state(model, 2)
    bad = dict(state)
    sent = manifest(state, version=5)
    # simulate a wrong slice: the sender's q_proj lands where k_proj should be
    bad["model.layers.0.self_attn.k_proj.weight"] = state["model.layers.0.self_attn.q_proj.weight"][: view.shape[0]]
    with pytest.raises(WeightSyncError, match="k_proj"):
        eng.load_weights(bad, version=5, manifest=sent)


def test_a_view_overwritten_by_a_later_copy_is_detected_without_a_manifest(tiny):
    """Same process (no manifest): every copy lands before any is verified, so a wrong slice that
    overlaps another view is caught even though each copy alone went in right."""
    model, tok = tiny
    eng = FastEngine(model, tok)
    first, second = "model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.q_proj.weight"
    eng._views = {**eng._views, second: eng._views[first]}  # layer 1's q lands on layer 0's bytes
    with pytest.raises(WeightSyncError, match="layers.0.self_attn.q_proj"):
        eng.load_weights(_perturbed_state(model, 3), version=2)
    assert eng.weights_version == -1


def test_missing_and_misshapen_tensors_are_named(tiny):
    model, tok = tiny
    eng = FastEngine(model, tok)
    state = dict(model.state_dict())
    state.pop("model.norm.weight")
    with pytest.raises(WeightSyncError, match="model.norm.weight"):
        eng.load_weights(state, version=1)
    state = dict(model.state_dict())
    state["model.norm.weight"] = torch.ones(3)
    with pytest.raises(WeightSyncError, match="shape"):
        eng.load_weights(state, version=1)


def _attention_only(model, seed=0):
    """A LoRA-like sync: q/k/v/o perturbed, every other tensor the same bytes."""
    g = torch.Generator().manual_seed(seed)
    return {k: (v + 0.05 * torch.randn(v.shape, generator=g)) if "self_attn" in k else v.clone()
            for k, v in model.state_dict().items()}


def test_a_sync_reports_only_the_tensors_whose_bytes_changed(tiny):
    model, tok = tiny
    eng = FastEngine(model, tok)
    state = _attention_only(model)
    rep = eng.load_weights(state, version=1)
    assert rep.changed == frozenset(k for k in eng._views if "self_attn" in k) and rep.changed
    assert rep.bytes == sum(eng._views[k].numel() * eng._views[k].element_size() for k in rep.changed)
    assert all(torch.equal(eng._views[k], state[k]) for k in eng._views)


def test_a_sync_with_a_manifest_copies_and_checks_every_tensor(tiny):
    model, tok = tiny
    eng = FastEngine(model, tok)
    state = _attention_only(model)
    rep = eng.load_weights(state, version=1, manifest=manifest(state, 1))
    assert rep.changed == frozenset(eng._views)
