"""The zero-variance refill (rl.refill_rounds, DAPO dynamic sampling) through the RL loop.

Half the tasks are scored the same whatever the policy writes (a group with no gradient), the
other half by sample index (always signal), so what the loop trains on does not depend on the
tiny model's luck.
"""

import asyncio
import zlib

import pytest

from posttrain.config import load_config
from posttrain.registry import verifier
from posttrain.types import Spec, VerifyResult


def constant(task) -> bool:
    return zlib.crc32(task.id.encode()) % 2 == 0


@verifier("test_refill_half_constant", answer_format="line")
class HalfConstant:
    async def __call__(self, task, traj, ctx):
        score = 1.0 if constant(task) else traj.sample / 4
        return VerifyResult(score, score == 1.0)


OVERRIDES = ["seed=3", "rl.steps=4", "rl.prompts_per_step=3", "rl.group_size=4", "rl.max_new_tokens=8",
             "rl.checkpoint_every=0", "log.detect_every=0", "tasks.domains={arithmetic: {n_train: 16, n_eval: 2}}",
             "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2",
             "model.tiny.num_key_value_heads=2"]


@pytest.fixture(scope="module")
def warm():
    """A tiny model that answers in the format (a short line, then end of turn): the format rule passes."""
    import dataclasses

    import torch

    from posttrain.config import SFTConfig
    from posttrain.models.tiny import build_tiny
    from posttrain.recipes.quickstart import make_splits
    from posttrain.train.sft import sft_train

    torch.set_num_threads(1)
    cfg = load_config(None, OVERRIDES)
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    train = [dataclasses.replace(t, verifier=Spec("test_refill_half_constant")) for t in make_splits(cfg).train]
    assert 0 < sum(map(constant, train)) < len(train)
    sft_train(model, tok, [(t.prompt, t.oracle) for t in train], SFTConfig(steps=40, batch_size=12, lr=1e-2))
    return model, tok, train


def _run(tmp_path, warm, *extra):
    import copy

    from posttrain.train.rl import build_state, train_rl

    model, tok, train = warm
    st = build_state(load_config(None, [*OVERRIDES, *extra]), tmp_path, copy.deepcopy(model), tok, train, train[:2],
                     None)
    asyncio.run(train_rl(st))
    rows, trajs = st.metrics.read(), list(st.store.iter())
    st.metrics.close(), st.store.close()
    return rows, trajs


def test_without_refill_a_step_trains_on_fewer_groups_than_it_drew(tmp_path, warm):
    rows, _ = _run(tmp_path, warm)
    assert not any(k.startswith("refill/") for r in rows for k in r)
    assert min(r["groups/trained"] for r in rows) < 3


def test_refill_trains_every_step_on_prompts_per_step_groups_with_signal_and_counts_the_extra_rollouts(tmp_path, warm):
    rows, trajs = _run(tmp_path, warm, "rl.refill_rounds=4")
    assert [r["groups/trained"] for r in rows] == [3] * 4
    assert all(r["refill/short"] == 0 for r in rows)
    assert any(r["refill/rounds"] > 1 for r in rows)  # the first draw did come up short at least once
    for step, r in enumerate(rows):  # every rollout is stored and counted: none lost, none free
        stored = [t for t in trajs if t.step == step]
        assert len(stored) == r["refill/prompts_drawn"] * 4
        assert r["refill/extra_rollouts"] == len(stored) - 3 * 4
        assert len({(t.group, t.sample) for t in stored}) == len(stored)  # rounds never merge groups


def test_refill_with_the_asynchronous_source_is_refused_at_load():
    from posttrain.config_check import check_config
    from posttrain.errors import ConfigError

    with pytest.raises(ConfigError, match="rl.refill_rounds=2 with rl.max_staleness=1"):
        check_config(load_config(None, ["rl.refill_rounds=2", "rl.max_staleness=1"]))


def test_without_refill_the_zero_variance_fraction_is_the_dropped_fraction(tmp_path, warm):
    rows, _ = _run(tmp_path, warm)
    assert [r["groups/zero_variance_frac"] for r in rows] == pytest.approx([r["groups/dropped_frac"] for r in rows])
    assert any(r["groups/zero_variance_frac"] > 0 for r in rows)


def test_with_refill_the_zero_variance_fraction_counts_every_group_drawn(tmp_path, warm):
    rows, _ = _run(tmp_path, warm, "rl.refill_rounds=4")
    for r in rows:  # dropped_frac also counts kept surplus groups; this counts only the groups with no signal
        assert r["groups/zero_variance_frac"] == pytest.approx(r["refill/dropped_groups"] / r["refill/prompts_drawn"])
