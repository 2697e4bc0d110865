"""Advantages through the RL loop: one estimator call over the whole batch, stored with the samples.

A tiny policy (SFT-warmed so its answers are well formed) takes one real `rl_step` under
`group_norm` and under `reinforce_pp`. A test verifier gives even groups a loud reward
spread (1, 0, 1, 0) and odd groups a quiet one (1, .9, .9, .8). group_norm scales every
group to unit std; reinforce_pp subtracts the group mean and scales the BATCH once, so the
quiet groups keep small advantages. (Before the batch call the loop called every estimator
one group at a time, and reinforce_pp was group_norm.) The expected values are re-derived
here from the stored rewards with `statistics`, not with the estimators.
"""

import asyncio
import copy
import dataclasses
import statistics

import pytest
import torch

from posttrain.config import load_config
from posttrain.registry import verifier
from posttrain.types import Spec, VerifyResult

EPS = 1e-6
QUIET = (1.0, 0.9, 0.9, 0.8)


@verifier("test_loud_and_quiet_groups", answer_format="line")
class LoudAndQuietGroups:
    """Even groups: 1, 0, 1, 0; odd groups: 1, .9, .9, .8 (by sample index)."""

    async def __call__(self, task, traj, ctx):
        score = float(traj.sample % 2 == 0) if traj.group % 2 == 0 else QUIET[traj.sample]
        return VerifyResult(score, score == 1.0)


def _cfg(estimator: str):
    return load_config(None, [
        "seed=5", "rl.steps=1", "rl.prompts_per_step=4", "rl.group_size=4", "rl.max_new_tokens=6", "rl.lr=3e-3",
        f"rl.advantage={estimator}", "tasks.domains={arithmetic: {n_train: 8, n_eval: 2}}",
        "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2",
        "model.tiny.num_key_value_heads=2",
    ])  # fmt: skip


@pytest.fixture(scope="module")
def setup():
    from posttrain.models.tiny import build_tiny
    from posttrain.config import SFTConfig
    from posttrain.recipes.quickstart import make_splits
    from posttrain.train.sft import sft_train

    torch.set_num_threads(1)
    cfg = _cfg("group_norm")
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    train = [dataclasses.replace(t, verifier=Spec("test_loud_and_quiet_groups")) for t in make_splits(cfg).train]
    sft_train(model, tok, [(t.prompt, t.oracle) for t in train], SFTConfig(steps=40, batch_size=8, lr=1e-2))
    return model, tok, train


@pytest.fixture(scope="module")
def steps(setup, tmp_path_factory):
    """{estimator: (stored trajectories of step 0, their stored advantages, the policy after the update)}."""
    from posttrain.train.rl import build_state, train_rl

    model, tok, train = setup
    out = {}
    for name in ("group_norm", "reinforce_pp"):
        st = build_state(_cfg(name), tmp_path_factory.mktemp(name), copy.deepcopy(model), tok, train, train[:2], None)
        asyncio.run(train_rl(st))  # rl.steps=1: the one step
        trajs, adv = list(st.store.iter(step=0)), st.store.advantages(0)
        st.store.close(), st.metrics.close()
        out[name] = (trajs, [adv[(t.group, t.sample)] for t in trajs], st.model)
    return out


def _centred(trajs):
    """r - group mean over the scored samples, in store order (group-major)."""
    by_group = {}
    for t in trajs:
        by_group.setdefault(t.group, []).append(t.reward)
    return [t.reward - statistics.mean(by_group[t.group]) for t in trajs], by_group


def test_the_same_rollout_under_both_estimators(steps):
    (a, _, _), (b, _, _) = steps["group_norm"], steps["reinforce_pp"]
    assert [t.reward for t in a] == [t.reward for t in b] and not any(t.infra_error for t in a)
    assert len({t.group for t in a}) == 4  # two loud and two quiet groups


def test_group_norm_scales_each_group(steps):
    trajs, adv, _ = steps["group_norm"]
    centred, by_group = _centred(trajs)
    want = [c / (statistics.stdev(by_group[t.group]) + EPS) for c, t in zip(centred, trajs)]
    assert adv == pytest.approx(want, abs=1e-4)


def test_reinforce_pp_scales_the_whole_batch_once(steps):
    trajs, adv, _ = steps["reinforce_pp"]
    centred, _ = _centred(trajs)
    mu, sd = statistics.mean(centred), statistics.stdev(centred)
    assert adv == pytest.approx([(c - mu) / (sd + EPS) for c in centred], abs=1e-4)


def test_reinforce_pp_differs_from_group_norm_where_groups_differ_in_spread(steps):
    (trajs, gn, _), (_, pp, _) = steps["group_norm"], steps["reinforce_pp"]
    spread = {g: statistics.stdev([t.reward for t in trajs if t.group == g]) for g in {t.group for t in trajs}}
    quiet = [i for i, t in enumerate(trajs) if spread[t.group] < 0.2 and abs(gn[i]) > 0.1]
    assert quiet  # a quiet group whose samples group_norm blows up to unit scale
    assert all(abs(pp[i]) < 0.5 * abs(gn[i]) for i in quiet)


def test_the_update_used_the_estimators_advantages(steps):
    (_, _, m_gn), (_, _, m_pp) = steps["group_norm"], steps["reinforce_pp"]
    assert any(not torch.equal(p, q) for p, q in zip(m_gn.parameters(), m_pp.parameters()))
