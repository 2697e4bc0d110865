"""The long-task queues (rl.longtail, train/longtail_source.py over schedule/longtail.py) through the
RL loop, on virtual time (posttrain/testing/simclock.py): tasks of two durations, verified in 0.5 s or 8 s.

A step waits only for the short lane, so no step lasts as long as a slow task; a slow group joins
a later step within the staleness bound, or is counted dropped; every group submitted is
accounted for in the rows.
"""

import asyncio
import copy
import dataclasses
import zlib

import pytest

from posttrain.config import load_config
from posttrain.registry import verifier
from posttrain.types import Spec, VerifyResult

SHORT_S, LONG_S = 0.5, 8.0
OVERRIDES = ["seed=2", "rl.steps=8", "rl.prompts_per_step=4", "rl.group_size=2", "rl.max_new_tokens=6",
             "rl.checkpoint_every=0", "log.detect_every=0", "tasks.domains={arithmetic: {n_train: 24, n_eval: 2}}",
             "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2",
             "model.tiny.num_key_value_heads=2", "rl.longtail.enabled=true", "rl.longtail.long_threshold_s=2.0"]


def slow(task) -> bool:
    return zlib.crc32(task.id.encode()) % 3 == 0


@verifier("test_longtail_two_durations", answer_format="line")
class TwoDurations:
    """Waits SHORT_S or LONG_S (virtual seconds), then scores by sample index: every group has signal."""

    async def __call__(self, task, traj, ctx):
        await asyncio.sleep(LONG_S if slow(task) else SHORT_S)
        return VerifyResult(traj.sample / 2, traj.sample == 1)


@pytest.fixture(scope="module")
def setup():
    import torch

    from posttrain.config import SFTConfig
    from posttrain.models.tiny import build_tiny
    from posttrain.recipes.quickstart import make_splits
    from posttrain.train.sft import sft_train

    torch.set_num_threads(1)
    cfg = load_config(None, OVERRIDES)
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    train = [dataclasses.replace(t, verifier=Spec("test_longtail_two_durations")) for t in make_splits(cfg).train]
    assert 0 < sum(map(slow, train)) < len(train) / 2
    # answers in the format (a short line, then end of turn), so the verifier runs and takes its time
    sft_train(model, tok, [(t.prompt, t.oracle) for t in train], SFTConfig(steps=40, batch_size=12, lr=1e-2))
    return model, tok, train


def _run(tmp_path, setup, *extra):
    from posttrain.testing.simclock import run_virtual
    from posttrain.train.rl import build_state, train_rl

    model, tok, train = setup
    st = build_state(load_config(None, [*OVERRIDES, *extra]), tmp_path, copy.deepcopy(model), tok, train, train[:2],
                     None)
    ends = []
    run_virtual(train_rl(st, on_step=lambda s, row: ends.append(asyncio.get_running_loop().time())))
    rows, trajs = st.metrics.read(), list(st.store.iter())
    st.metrics.close(), st.store.close()
    return rows, trajs, [b - a for a, b in zip([0.0, *ends], ends)]


def _accounted(rows):
    """Every group submitted was trained on, dropped as stale, failed, or is still in flight at the end."""
    done = sum(r["longtail/trained"] + r["longtail/stale_dropped"] + r["longtail/failed"] for r in rows)
    return sum(r["longtail/submitted"] for r in rows) == done + rows[-1]["longtail/in_flight"]


def test_slow_groups_never_stall_a_step_and_join_a_later_one(tmp_path, setup):
    rows, trajs, step_s = _run(tmp_path, setup, "rl.longtail.max_staleness=8")
    assert max(step_s) < LONG_S  # no step waited for a slow group
    assert sum(r["longtail/late"] for r in rows) >= 1 and sum(r["longtail/stale_dropped"] for r in rows) == 0
    assert _accounted(rows)
    by_id = {t.id: t for t in setup[2]}
    slow_trained = [t for t in trajs if slow(by_id[t.task_id])]
    assert slow_trained and all(t.weights_version < t.step for t in slow_trained)  # joined a later step
    assert len(trajs) == 2 * sum(r["longtail/trained"] for r in rows)  # every delivered sample stored


def test_a_late_group_past_the_staleness_bound_is_dropped_and_counted(tmp_path, setup):
    rows, trajs, _ = _run(tmp_path, setup, "rl.longtail.max_staleness=0")
    assert sum(r["longtail/stale_dropped"] for r in rows) >= 1 and sum(r["longtail/late"] for r in rows) == 0
    assert all(t.weights_version == t.step for t in trajs)
    assert _accounted(rows)


def test_the_long_queue_is_its_own_source_and_refuses_the_others_at_load():
    from posttrain.config_check import check_config
    from posttrain.errors import ConfigError

    with pytest.raises(ConfigError, match="rl.longtail.enabled=true is its own batch source"):
        check_config(load_config(None, ["rl.longtail.enabled=true", "rl.max_staleness=1"]))


def test_the_sharded_trainer_refuses_the_long_queue_at_load():
    from posttrain.config_check import check_config
    from posttrain.errors import ConfigError

    with pytest.raises(ConfigError, match="rl.longtail.enabled .* not supported by the sharded trainer"):
        check_config(load_config(None, ["rl.longtail.enabled=true", "trainer.world_size=2"]))



def test_the_long_queue_stays_bounded_when_a_third_of_a_domain_is_slow(tmp_path, setup):
    """A third of the domain's tasks are slow, so the domain's history predicts every task long; past
    2 x rl.longtail.long_concurrency queued, draws start short (promoted if slow) instead of piling up
    behind the long lane while steps end with nothing (benchmarks/longtail_loop.py found it). The
    checks' pool (sandbox.concurrency) holds both lanes' checks, as there."""
    rows, _, _ = _run(tmp_path, setup, "rl.longtail.max_staleness=8", "rl.longtail.long_concurrency=1",
                      "sandbox.concurrency=64", "rl.steps=16")
    # without the bound: from step 11 every draw queued long, 9 -> 25 waiting, steps trained nothing
    assert max(r["queue/backlog/long"] for r in rows) <= 2 + 4 + 2  # the bound + a step's promotions + slack
    assert all(r["longtail/trained"] > 0 for r in rows)
    assert _accounted(rows)
