"""A real RL run (tiny model, code tasks verified in a real pool) whose sandbox goes down
for good after step 0: with rl.infra_error.action=stop it stops with one line naming the
cause and keeps the last finished step's checkpoint; it never carries on silently."""

from __future__ import annotations

import asyncio

import pytest

from posttrain.config import load_config
from posttrain.rollout.engine import Completion
from posttrain.sandbox import SandboxPool
from posttrain.sandbox.zygote import Zygote

_OVERRIDES = [
    "seed=1", "rl.steps=4", "rl.prompts_per_step=2", "rl.group_size=2", "rl.max_new_tokens=8", "rl.checkpoint_every=0",
    "rl.loss=grpo", "tasks.domains={code: {n_train: 8, n_eval: 2}}", "model.tiny.hidden_size=32",
    "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2",
    "rl.infra_error={window: 8, min_samples: 4, threshold: 0.5, action: stop}",
]


class OneAnswerEngine:
    """Answers every prompt with one well-formed expression, so every sample reaches the sandbox."""

    weights_version = 0

    def __init__(self, tok, answers):
        self.tok, self.answers = tok, answers

    def generate(self, requests):
        out = []
        for r in requests:
            for k in range(r.params.n):
                text = next(self.answers)
                ids = tuple(self.tok(text, add_special_tokens=False)["input_ids"]) + (self.tok.eos_token_id,)
                out.append(Completion(r.id, k, ids, tuple([-1.0] * len(ids)), text, "stop"))
        return out

    def load_weights(self, state, version):
        self.weights_version = version


@pytest.mark.slow
def test_rl_run_stops_on_a_sandbox_outage_and_keeps_its_last_step(tmp_path, monkeypatch):
    import itertools

    from posttrain.models.tiny import build_tiny
    from posttrain.train.checkpoint import list_checkpoints
    from posttrain.train.infra_guard import InfraErrorRateExceeded
    from posttrain.tasks.splits import make_splits
    from posttrain.train.rl import build_state, train_rl

    cfg = load_config(None, _OVERRIDES)
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    splits = make_splits(cfg)
    pool = SandboxPool(concurrency=2, mode="pooled")
    st = build_state(cfg, tmp_path, model, tok, splits.train, splits.held_out, pool)
    st.engine = OneAnswerEngine(tok, (f"x*{i}+1" for i in itertools.count(2)))  # distinct: no verifier cache hits
    real_exec = Zygote.exec

    async def dead_slot(self, *a, **kw):  # from step 1 on, every slot dies as it is used
        self.cg.kill_all()
        return await real_exec(self, *a, **kw)

    def after_step(step, row):
        assert row["infra_error_frac"] == 0.0  # step 0 ran on a healthy sandbox
        monkeypatch.setattr(Zygote, "exec", dead_slot)

    with pytest.raises(InfraErrorRateExceeded) as e:
        asyncio.run(train_rl(st, on_step=after_step))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("sandbox: ") and "verifications were infra errors" in msg
    assert "warm slot died" in msg and "rl.infra_error.action=warn" in msg
    assert list_checkpoints(tmp_path) == [0]  # the last finished step is kept for --resume
    st.metrics.close(), st.store.close()
    monkeypatch.setattr(Zygote, "exec", real_exec)
    asyncio.run(pool.close())
