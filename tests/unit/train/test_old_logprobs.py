"""bf16 rollouts with an fp32 recompute of the behaviour logprobs (`rl.old_logprobs: recompute`,
train/update.py): the engine samples with bf16 weight matmuls, the trainer's fp32 logprobs at the
rollout weights are the ratio's old logprobs, so the engine's rounding never enters the loss."""

from __future__ import annotations

import asyncio
import copy

import pytest
import torch

from posttrain.config import RLConfig, load_config
from posttrain.config_check import check_config
from posttrain.errors import ConfigError
from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from posttrain.train.update import recompute_old_logprobs, update_policy
from posttrain.types import Trajectory, Turn


@pytest.fixture(scope="module")
def tiny():
    from posttrain.models.tiny import build_tiny

    torch.manual_seed(0)
    return build_tiny(seed=0)


def bf16_rollouts(model, tok, prompts=4, n=4) -> list[Trajectory]:
    """GRPO groups sampled by the fast engine with bf16 weight matmuls, its logprobs attached."""
    g = torch.Generator().manual_seed(3)
    eng = FastEngine(copy.deepcopy(model), tok, matmul_dtype="bfloat16", ignore_eos=True)
    reqs = [GenRequest(tuple(torch.randint(len(tok) - 97, len(tok), (int(l),), generator=g).tolist()),
                       SamplingParams(temperature=1.0, max_new_tokens=12, n=n, seed=7))
            for l in torch.randint(6, 14, (prompts,), generator=g)]
    out = []
    for k, c in enumerate(eng.generate(reqs)):
        turn = Turn("assistant", "", tuple(c.token_ids), tuple(c.logprobs))
        out.append(Trajectory(f"t{k // n}", "v", "d", tuple(reqs[k // n].prompt_ids), (turn,), group=k // n,
                              sample=k % n))
    return out


def with_logprobs(trajs, logp):
    """Copies of `trajs` whose turn carries `logp`'s row (its completion positions)."""
    out = []
    for i, t in enumerate(trajs):
        P, n = len(t.prompt_ids), len(t.turns[0].token_ids)
        lp = tuple(logp[i, P - 1:P - 1 + n].tolist())
        out.append(Trajectory(t.task_id, t.task_version, t.domain, t.prompt_ids,
                              (Turn("assistant", "", t.turns[0].token_ids, lp),), group=t.group, sample=t.sample))
    return out


def test_recomputed_logprobs_are_fp32_and_within_a_bound_of_the_bf16_engines(tiny):
    model, tok = tiny
    trajs = bf16_rollouts(model, tok)
    from posttrain.train.batching import pack_trajectories

    tb = pack_trajectories(trajs, tok.pad_token_id)
    (old,) = recompute_old_logprobs(model, [trajs], tok.pad_token_id, RLConfig())
    assert old.dtype == torch.float32
    gap = ((old - tb.old_logp).abs() * tb.loss_mask).max().item()
    assert 0 < gap < 0.1  # bf16 rounding of the weights: there, and small (0.005-0.11 on the arch configs)


@pytest.mark.parametrize("minibatches", [1, 2])  # fused into the update's forward / one no-grad pass first
def test_the_update_with_recompute_equals_the_update_on_exact_fp32_logprobs(tiny, minibatches):
    model, tok = tiny
    trajs = bf16_rollouts(model, tok)
    (fp32,) = recompute_old_logprobs(model, [trajs], tok.pad_token_id, RLConfig())
    exact = with_logprobs(trajs, fp32)
    adv = torch.randn(len(trajs), generator=torch.Generator().manual_seed(1))
    results = {}
    for name, batch, how in (("recompute", trajs, "recompute"), ("exact", exact, "engine"),
                             ("engine_bf16", trajs, "engine")):
        m = copy.deepcopy(model)
        opt = torch.optim.SGD(m.parameters(), lr=1.0)
        cfg = RLConfig(max_new_tokens=12, minibatches=minibatches, old_logprobs=how, clip_eps=0.0001)
        st = update_policy(m, opt, batch, adv, cfg, tok.pad_token_id)
        results[name] = (torch.cat([p.detach().flatten() for p in m.parameters()]), st)
    w_re, st_re = results["recompute"]
    w_ex, st_ex = results["exact"]
    torch.testing.assert_close(w_re, w_ex, rtol=1e-5, atol=1e-6)
    assert st_re["loss"] == pytest.approx(st_ex["loss"], rel=1e-5, abs=1e-7)
    assert st_re["rollout_logprob_gap"] > 0
    # a tight clip makes the engine's bf16 logprobs visible in the loss: the recompute removed them
    assert not torch.allclose(results["engine_bf16"][0], w_ex, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("overrides,expect", [
    (["engine.args={matmul_dtype: bfloat16}"], "engine.args.matmul_dtype=bfloat16 with rl.old_logprobs=engine"),
    (["engine.args={matmul_dtype: auto}"], "engine.args.matmul_dtype=auto with rl.old_logprobs=engine"),
    (["rl.old_logprobs=recompute", "rl.max_staleness=1"], "rl.old_logprobs=recompute needs the synchronous"),
    (["rl.old_logprobs=fp32"], "rl.old_logprobs"),
])
def test_bf16_rollouts_without_the_recompute_are_refused_at_load(overrides, expect):
    with pytest.raises(ConfigError) as e:
        check_config(load_config(None, overrides), needs=("rl",))
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_bf16_rollouts_with_the_recompute_pass_the_check():
    check_config(load_config(None, ["engine.args={matmul_dtype: auto}", "rl.old_logprobs=recompute"]), needs=("rl",))


def bf16_rl_state(tmp_path, *extra: str):
    """build_state for one RL step of 8 x 8 on a small tiny model with bf16 rollouts and the recompute
    (test_objective_loop.py's step: the soft overlong penalty gives the untrained model's groups
    rewards that differ); `extra` overrides come last."""
    from posttrain.models.tiny import build_tiny
    from posttrain.tasks.splits import make_splits
    from posttrain.train.rl import build_state

    over = ["seed=1", "rl.steps=1", "rl.prompts_per_step=8", "rl.group_size=8", "rl.max_new_tokens=8",
            "rl.checkpoint_every=0", "log.trackers=[]", "log.detect_every=0", "rl.clip_eps=0.0001",
            "tasks.domains={arithmetic: {n_train: 40, n_eval: 4}}", "model.tiny.hidden_size=32",
            "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2",
            "engine.args={matmul_dtype: bfloat16}", "rl.old_logprobs=recompute",
            "rl.overlong.name=soft_penalty", "rl.overlong.args={cache: 4}", *extra]
    cfg = load_config(None, over)
    check_config(cfg, needs=("rl",))
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    train = make_splits(cfg).train
    return build_state(cfg, tmp_path, model, tok, train, train[:2], None)


def last_row(st) -> dict:
    """Run the state's step(s) through train_rl; the last metrics row."""
    from posttrain.train.rl import train_rl

    asyncio.run(train_rl(st))
    rows = st.metrics.read()
    st.metrics.close(), st.store.close()
    return rows[-1]


def test_an_rl_step_with_bf16_rollouts_trains_on_the_recomputed_logprobs(tmp_path):
    """Through the loop (build_state -> train_rl): the engine samples in bf16, the step's loss
    uses the trainer's recompute (ratio exactly 1 on the one minibatch: nothing clipped)."""
    row = last_row(bf16_rl_state(tmp_path))
    assert row["train/rollout_logprob_gap"] > 0  # the engine's logprobs were bf16 ones
    assert row["train/clip_frac"] == 0.0  # the ratio was 1 everywhere: the old logprobs were the update's own


def test_rollout_correction_without_the_recompute_is_refused_at_load():
    with pytest.raises(ConfigError) as e:
        check_config(load_config(None, ["rl.rollout_correction=true"]), needs=("rl",))
    assert "rl.rollout_correction=true with rl.old_logprobs=engine" in str(e.value) and "\n" not in str(e.value)


def _updated(model, trajs, adv, cfg, pad_id):
    """update_policy as LocalTrainer.update calls it: rl.offpolicy's correction passed with rl.rollout_correction."""
    from posttrain.train.async_rl.correction import correction_for

    m = copy.deepcopy(model)
    extra = {"correction": correction_for(cfg.offpolicy)} if cfg.rollout_correction else {}
    st = update_policy(m, torch.optim.SGD(m.parameters(), lr=1.0), trajs, adv, cfg, pad_id, **extra)
    return torch.cat([p.detach().flatten() for p in m.parameters()]), st


def test_the_rollout_correction_weighs_a_token_by_its_capped_trainer_to_engine_ratio(tiny):
    """rl.rollout_correction (TIS, cap 2): one sample whose engine logprobs sit 5 nats below the
    trainer's gets weight 2 on every token (exp(5) capped), the others, exact, weight 1. Under a
    constant-denominator loss (dr_grpo) that is the plain recompute update with the sample's
    advantage doubled."""
    model, tok = tiny
    trajs = bf16_rollouts(model, tok)
    (fp32,) = recompute_old_logprobs(model, [trajs], tok.pad_token_id, RLConfig())
    low = fp32.clone()
    low[0] -= 5.0
    engine_lp = with_logprobs(trajs, low)  # sample 0: ratio e^5 everywhere; the rest: ratio 1
    adv = torch.randn(len(trajs), generator=torch.Generator().manual_seed(1))
    doubled = adv.clone()
    doubled[0] *= 2
    base = dict(max_new_tokens=12, old_logprobs="recompute", loss={"name": "dr_grpo"})
    w_corr, st = _updated(model, engine_lp, adv, RLConfig(**base, rollout_correction=True), tok.pad_token_id)
    w_ref, _ = _updated(model, engine_lp, doubled, RLConfig(**base), tok.pad_token_id)
    torch.testing.assert_close(w_corr, w_ref, rtol=1e-5, atol=1e-6)
    n0 = len(trajs[0].turns[0].token_ids)
    n_all = sum(len(t.turns[0].token_ids) for t in trajs)
    assert st["offpolicy/clipped_frac"] == pytest.approx(n0 / n_all)  # sample 0's tokens, and only those


def test_an_rl_step_with_the_rollout_correction_weighs_its_tokens(tmp_path):
    """Through the loop (build_state -> train_rl -> LocalTrainer.update): rl.rollout_correction
    brings rl.offpolicy's pass in, whose stats reach the metrics, and the ratio is still 1."""
    row = last_row(bf16_rl_state(tmp_path, "rl.rollout_correction=true", "trainer.precision=fp32"))
    assert row["train/offpolicy/logp_abs_diff"] == pytest.approx(row["train/rollout_logprob_gap"])
    assert row["train/offpolicy/logp_abs_diff"] > 0  # the engine's bf16 logprobs were weighed
    assert row["train/clip_frac"] == 0.0
