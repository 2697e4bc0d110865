"""The asynchronous RL loop (train/async_rl/) on the tiny model, CPU, one thread.

K = 0 is the synchronous loop bitwise (and so is the async machinery run at K = 0); K >= 1
never trains on a sample more than K versions old; a run resumed from a checkpoint with
batches in flight reproduces the uninterrupted run bitwise.
"""

import asyncio
import copy
import dataclasses

import pytest
import torch

from posttrain.config import load_config
from posttrain.registry import verifier
from posttrain.types import Spec, VerifyResult


@verifier("test_async_digit_match", answer_format="line")
class DigitMatch:
    """Partial credit (oracle digits matched by position), so a barely trained policy has reward variance."""

    async def __call__(self, task, traj, ctx):
        text, want = traj.completion_text.strip(), task.oracle
        score = sum(a == b for a, b in zip(text, want)) / max(len(want), len(text), 1)
        return VerifyResult(score, score == 1.0)


def _overrides(steps, *extra):
    return [
        "seed=5", f"rl.steps={steps}", "rl.prompts_per_step=3", "rl.group_size=4", "rl.max_new_tokens=6",
        "rl.checkpoint_every=2", "rl.keep_checkpoints=4", "rl.lr=3e-3", "rl.loss=grpo", "rl.warmup_steps=1",
        "tasks.domains={arithmetic: {n_train: 12, n_eval: 4}}", "model.tiny.hidden_size=32",
        "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2",
        *extra,
    ]


TIME_KEYS = ("time/", "mem/", "async/", "train/offpolicy/")  # wall clock, memory, and keys only the async loop writes


def _comparable(rows):
    return [{k: v for k, v in r.items() if not k.startswith(TIME_KEYS)} for r in rows]


@pytest.fixture(scope="module")
def setup():
    from posttrain.config import SFTConfig
    from posttrain.models.tiny import build_tiny
    from posttrain.recipes.quickstart import make_splits
    from posttrain.train.sft import sft_train

    torch.set_num_threads(1)
    cfg = load_config(None, _overrides(4))
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    train = [dataclasses.replace(t, verifier=Spec("test_async_digit_match")) for t in make_splits(cfg).train]
    sft_train(model, tok, [(t.prompt, t.oracle) for t in train], SFTConfig(steps=40, batch_size=12, lr=1e-2))
    return model, tok, train


def _run(setup, run_dir, steps, *extra, resume=False, loop=None):
    from posttrain.train.rl import build_state, train_rl

    model, tok, train = setup
    run_dir.mkdir(parents=True, exist_ok=True)
    st = build_state(load_config(None, _overrides(steps, *extra)), run_dir, copy.deepcopy(model), tok, train,
                     train[:2], None, resume=resume)
    asyncio.run(loop(st) if loop is not None else train_rl(st))
    rows = st.metrics.read()
    trajs = list(st.store.iter())
    st.metrics.close(), st.store.close()
    return rows, st.model, trajs


def _same_weights(a, b):
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_k0_is_the_synchronous_loop_bitwise_and_so_is_the_async_machinery_at_k0(tmp_path, setup):
    from posttrain.train.async_rl.source import AsyncBatchSource
    from posttrain.train.rl import train_rl

    old, m_old, t_old = _run(setup, tmp_path / "sync", 4)  # the default config: no async key set
    k0, m_k0, _ = _run(setup, tmp_path / "k0", 4, "rl.max_staleness=0", "rl.offpolicy.name=icepop")
    piped, m_piped, t_piped = _run(setup, tmp_path / "piped", 4, loop=lambda st: train_rl(st, AsyncBatchSource(0)))
    assert any(r.get("train/grad_norm", 0.0) > 0.0 for r in old)  # the comparison is not vacuous
    assert (tmp_path / "k0" / "metrics.jsonl").read_bytes() != b""
    assert _comparable(k0) == _comparable(old)
    assert _comparable(piped) == _comparable(old)
    assert _same_weights(m_old, m_k0) and _same_weights(m_old, m_piped)
    assert [(t.step, t.task_id, t.turns[0].token_ids) for t in t_old] == \
        [(t.step, t.task_id, t.turns[0].token_ids) for t in t_piped]


@pytest.mark.parametrize("k", [1, 2])
def test_no_sample_is_more_than_k_versions_old_and_staleness_is_k_once_warm(tmp_path, setup, k):
    rows, _, trajs = _run(setup, tmp_path / "run", 5, f"rl.max_staleness={k}")
    assert [r["step"] for r in rows] == list(range(5))
    assert [r["async/staleness"] for r in rows] == [min(s, k) for s in range(5)]  # pinned: v(s) - K, floored at 0
    for t in trajs:  # trained at step s with version s: the sample's recorded version is s - min(s, K)
        assert t.weights_version == t.step - min(t.step, k)
    for r in rows:
        assert sum(r[f"async/staleness_frac/{a}"] for a in range(k + 1)) == pytest.approx(1.0)
        assert r["train/offpolicy/kl"] >= 0.0 and 0.0 <= r["train/offpolicy/clipped_frac"] <= 1.0
        assert r["time/consumer_idle_s"] >= 0.0 and r["time/producer_idle_s"] >= 0.0


def test_async_resume_from_a_checkpoint_with_batches_in_flight_is_bitwise(tmp_path, setup):
    full, m_full, t_full = _run(setup, tmp_path / "a", 6, "rl.max_staleness=2")
    from posttrain.train.rl import train_rl

    _run(setup, tmp_path / "b", 6, "rl.max_staleness=2", loop=lambda st: train_rl(st, stop=lambda s, row: s == 1))
    res, m_res, t_res = _run(setup, tmp_path / "b", 6, "rl.max_staleness=2", resume=True)
    assert [r["step"] for r in res] == list(range(6))
    # batches 2 and 3 (pinned to versions 0, 1) were generated before the checkpoint of step 1 and
    # saved with it; batch 4 (pinned to the checkpoint's version 2) too if the producer got to it
    assert res[-1]["async/reused"] in (2, 3) and res[-1]["async/regenerated"] == 0
    assert _comparable(res) == _comparable(full)
    assert _same_weights(m_full, m_res)
    assert [(t.step, t.group, t.sample, t.task_id, t.weights_version) for t in t_res] == \
        [(t.step, t.group, t.sample, t.task_id, t.weights_version) for t in t_full]


def test_resume_with_a_smaller_k_regenerates_batches_older_than_it_allows(tmp_path, setup):
    from posttrain.train.rl import train_rl

    _run(setup, tmp_path / "r", 5, "rl.max_staleness=2", loop=lambda st: train_rl(st, stop=lambda s, row: s == 1))
    rows, _, trajs = _run(setup, tmp_path / "r", 5, "rl.max_staleness=1", resume=True)
    assert [r["step"] for r in rows] == list(range(5))
    assert rows[-1]["async/stale_dropped"] >= 1  # batch 2 was pinned to version 0; the trainer holds 2
    assert all(t.step - t.weights_version <= 1 for t in trajs if t.step >= 2)


def _slow_until_new_weights(st):
    """Hold each generate call's second decode step until the trainer offers newer weights (3 s at
    most), so the update lands in the middle of a batch however fast the producer is."""
    import time

    eng = st.engine
    step, gen = eng._step, eng.generate
    seen = {"steps": 0}

    def generate(reqs):
        seen["steps"] = 0
        return gen(reqs)

    def held_step(done):
        seen["steps"] += 1
        if seen["steps"] == 2 and eng._source is not None:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 3.0 and (eng._source() or (-1,))[0] <= eng.weights_version:
                time.sleep(0.005)
        step(done)

    eng.generate, eng._step = generate, held_step


def test_partial_rollouts_take_weights_mid_batch_and_no_token_is_more_than_k_old(tmp_path, setup):
    from posttrain.train.rl import train_rl

    def loop(st):
        _slow_until_new_weights(st)
        return train_rl(st)

    k = 1
    rows, _, trajs = _run(setup, tmp_path / "run", 5, f"rl.max_staleness={k}", "rl.partial_rollouts=true",
                          "rl.max_new_tokens=8", loop=loop)
    assert [r["step"] for r in rows] == list(range(5))
    assert sum(r["async/inflight_updates"] for r in rows) >= 1
    spanning = [t for t in trajs if len(set(t.turns[0].token_versions)) > 1]
    assert spanning and max(r["async/partial_frac"] for r in rows) > 0
    for t in trajs:  # trained at step s with version s: every token at most K old, the oldest recorded
        vs = t.turns[0].token_versions
        assert len(vs) == len(t.turns[0].token_ids) and list(vs) == sorted(vs)
        assert t.weights_version == min(vs) >= t.step - k and max(vs) <= t.step
    for r in rows:
        assert sum(r[f"async/token_staleness_frac/{a}"] for a in range(k + 1)) == pytest.approx(1.0)


def test_stale_lr_scale_is_the_rule_of_the_mean_token_age():
    from types import SimpleNamespace as NS

    from posttrain.train.async_rl.source import stale_lr_scale

    turn = lambda ids, vs=None, trainable=True: NS(token_ids=ids, token_versions=vs, trainable=trainable)  # noqa: E731
    whole = NS(infra_error=False, weights_version=3, turns=[turn([1, 2])])  # 2 tokens, 2 versions old at version 5
    split = NS(infra_error=False, weights_version=4, turns=[turn([1, 2], (4, 5)), turn([9], trainable=False)])
    broken = NS(infra_error=True, weights_version=0, turns=[turn([1])])  # not trained on: not counted
    assert stale_lr_scale([whole, split, broken], 5, "inverse") == pytest.approx(1 / (1 + (2 + 2 + 1 + 0) / 4))
    assert stale_lr_scale([whole], 5, "none") == 1.0 and stale_lr_scale([], 5, "inverse") == 1.0
    assert stale_lr_scale([whole], 3, "inverse") == 1.0  # all fresh: exactly 1, the synchronous step


@pytest.mark.parametrize("rule, scale", [("inverse", 0.5), ("none", 1.0)])
def test_each_update_steps_with_the_scaled_lr_and_the_schedule_resumes_after(tmp_path, setup, monkeypatch, rule, scale):
    import posttrain.train.update as upd

    seen, real = [], upd.update_policy

    def spy(model, opt, *a, **kw):
        seen.append(opt.param_groups[0]["lr"])
        return real(model, opt, *a, **kw)

    monkeypatch.setattr(upd, "update_policy", spy)
    rows, _, _ = _run(setup, tmp_path / "run", 4, "rl.max_staleness=1", f"rl.stale_lr={rule}")
    assert [r["async/lr_scale"] for r in rows] == [1.0] + [scale] * 3  # batch 0 is fresh, then 1 version old
    # rl.lr (3e-3) times this update's scale: the scale never compounds, the schedule sets each step's lr anew
    assert seen == pytest.approx([3e-3] + [3e-3 * scale] * 3)


def test_every_detector_runs_in_async_mode_and_writes_the_synchronous_keys(tmp_path, setup):
    from posttrain.registry import registry

    rows, _, _ = _run(setup, tmp_path / "run", 4, "rl.max_staleness=1", "log.detect_every=2")
    names = registry("detector").names()
    assert names  # the built-in detectors are registered
    want = {k for n in names for k in (f"detect/{n}", f"detect/{n}/score")}
    assert [sorted(want - set(r)) for r in rows if r["step"] in (1, 3)] == [[], []]  # every detector, every 2nd step
    assert all(not k.startswith("detect/") for r in rows if r["step"] in (0, 2) for k in r)
