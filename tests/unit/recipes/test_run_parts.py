"""The pipeline builds a run's parts once and hands them in: one sandbox pool of
sandbox.concurrency slots, one VerifierRunner shared by the "before" eval, RL and the "after" eval."""

import os

from posttrain.config import load_config
from posttrain.recipes.pipeline import RunContext, run_recipe

SMALL = ["rl.steps=1", "tasks.domains={arithmetic: {n_train: 8, n_eval: 2}}", "model.tiny.hidden_size=32",
         "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2"]


class PartsRecorder:
    """A sandboxed recipe whose stages record which runner and pool each one is handed."""

    title, summary_file, sandboxed, resumable = "parts", "parts_summary.json", True, False

    def __init__(self) -> None:
        self.seen: dict[str, tuple] = {}

    def splits(self, cfg):
        from posttrain.tasks.splits import make_splits

        return make_splits(cfg)

    async def base(self, ctx: RunContext):
        from posttrain.models.tiny import build_tiny

        return build_tiny(ctx.cfg.model.tiny, seed=0)

    async def warm_up(self, ctx: RunContext):
        return ctx.model, ctx.tok

    async def evaluate(self, ctx: RunContext, when: str):
        runner = ctx.runner if ctx.state is None else ctx.state.runner
        self.seen[when] = (runner, ctx.sandbox)

    async def train(self, ctx: RunContext):
        st = ctx.rl_state()
        self.seen["rl"] = (st.runner, st.runner.ctx.sandbox)

    def summarize(self, ctx: RunContext, before, after):
        return {}

    def finish(self, ctx: RunContext, summary):
        pass


def test_one_runner_and_one_pool_of_the_configured_size_serve_every_stage(tmp_path):
    r = PartsRecorder()
    run_recipe(r, load_config(None, [*SMALL, "sandbox.concurrency=3"]), tmp_path / "run")
    runners = {id(v[0]) for v in r.seen.values()}
    pools = {id(v[1]) for v in r.seen.values()}
    assert set(r.seen) == {"before", "rl", "after"} and len(runners) == 1 and len(pools) == 1
    runner, pool = r.seen["rl"]
    assert pool.concurrency == 3 and runner.concurrency == 3


def test_concurrency_zero_is_the_number_of_cores(tmp_path):
    r = PartsRecorder()
    run_recipe(r, load_config(None, SMALL), tmp_path / "run")
    runner, pool = r.seen["rl"]
    assert pool.concurrency == (os.cpu_count() or 1) and runner.concurrency == max(2, os.cpu_count() or 1)
