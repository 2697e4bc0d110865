"""The one pipeline every recipe runs (DESIGN.md, `recipes/`):

    splits -> base model -> warm-up (SFT with a stop rule) -> eval "before" -> train (RL, DPO or SFT)
           -> eval "after" -> summary and report

    summary = run_recipe("rl", cfg, Path("runs/quickstart"), report=progress)

A recipe is a `Recipe` (the Protocol below) registered by name with `@recipe("name")` (plus
`settings=`, the section of keys it alone reads, `recipe.<name>:` in a run config: config_recipe.py):
`rl` (`posttrain quickstart`, `posttrain rl`, the real-model presets), `vision`, `agent`, `sft`
and `dpo`. It supplies what each stage does; the pipeline owns their order and the run
directory, so no recipe can skip a step the others take:
- the splits are built first (they refuse repeated task ids), and `config.yaml` is written only
  after them; the tasks are pinned in RUN/tasks, where replay and postmortem read them back;
- every stage is timed (`summary["phase_s"]`);
- the summary file and report.html are written at the end, and the RL state's metrics and
  trajectory store are closed, whatever the recipe.
A recipe holds no algorithm logic: its stages call train/, eval/ and rollout/.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

from posttrain.config import RunConfig, dump_config
from posttrain.config_recipe import with_resolved_settings
from posttrain.registry import registry
from posttrain.store.run import RunDir
from posttrain.tasks.splits import Splits, pin_splits

Report = Callable[[str, dict], None]  # phase, info -> progress display (cli/common.py PhaseProgress)


@dataclass
class RunContext:
    """What the stages share: the config, the run directory and what earlier stages built."""

    cfg: RunConfig
    run_dir: Path
    resume: bool = False
    report: Report = lambda phase, info: None
    budget_s: float | None = None  # RL ends after this many seconds (equal-wall-time comparisons)
    splits: Splits | None = None
    sandbox: Any = None
    runner: Any = None  # the run's one VerifierRunner over `sandbox`: eval "before", RL and eval "after" share it
    model: Any = None
    tok: Any = None
    state: Any = None  # train/rl.py RLState, once a stage asked for it
    extra: dict[str, Any] = field(default_factory=dict)  # what a recipe keeps between its own stages
    phase_s: dict[str, float] = field(default_factory=dict)

    def rl_state(self, tasks: Sequence[Any] | None = None, engine_factory: Any = None) -> Any:
        """The RL state (policy, engine, scheduler, store, metrics), built on first use: a recipe
        may evaluate "before" on its engine, or only build it to train."""
        if self.state is None:
            from posttrain.train.rl import build_state

            assert self.splits is not None
            self.state = build_state(self.cfg, self.run_dir, self.model, self.tok,
                                     self.splits.rl if tasks is None else tasks, self.splits.held_out,
                                     self.sandbox, resume=self.resume, engine_factory=engine_factory,
                                     runner=self.runner, agent_proxy=self.agent_proxy())
        return self.state

    def agent_proxy(self) -> Any:
        """What serves the policy to an external agent process (agent.external), or None. Wired here,
        at the composition root: rollout/ and train/ sit below serve/ and never import it."""
        if self.cfg.agent.external is None:
            return None
        from posttrain.serve.proxy_host import ServedProxy

        return ServedProxy

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        yield
        self.phase_s[f"{name}_s"] = self.phase_s.get(f"{name}_s", 0.0) + time.perf_counter() - t0


class Recipe(Protocol):
    title: str  # report.html's title
    summary_file: str  # the summary's name in the run directory
    sandboxed: bool  # its verifiers run programs: the pipeline opens the sandbox pool
    resumable: bool  # `--resume` continues it (RL checkpoints, cached phases)

    def splits(self, cfg: RunConfig) -> Splits | None: ...  # None: the data comes from files (sft, dpo)

    async def base(self, ctx: RunContext) -> tuple[Any, Any]: ...  # the base model and its tokenizer

    async def warm_up(self, ctx: RunContext) -> tuple[Any, Any]: ...  # SFT before RL (or as is)

    async def evaluate(self, ctx: RunContext, when: str) -> Any: ...  # "before" / "after"

    async def train(self, ctx: RunContext) -> None: ...  # RL, DPO or SFT

    def summarize(self, ctx: RunContext, before: Any, after: Any) -> dict: ...

    def finish(self, ctx: RunContext, summary: dict) -> None: ...  # plots and pages beside report.html


def recipe(name: str, settings: type | None = None) -> Callable[[Any], Any]:
    """Register a Recipe class under `name` (`run_recipe(name, ...)`, `posttrain ... --recipe`). `settings`:
    the pydantic section of the keys it alone reads, `recipe.<name>:` in a run config (config_recipe.py)."""
    return registry("recipe").register(name, settings=settings)


def get_recipe(name: str) -> Recipe:
    return registry("recipe").get(name)()


def run_recipe(name: str | Recipe, cfg: RunConfig, run_dir: Path, resume: bool = False, report: Report | None = None,
               sandbox: Any = None, budget_s: float | None = None, title: str | None = None) -> dict:
    """Run every stage of recipe `name` in one event loop (the sandbox pool and verifier runner
    live on it); returns the summary, also written to RUN/<recipe.summary_file>. `title` (the
    command that ran it, `posttrain rl`) heads report.html; default the recipe's own."""
    from posttrain.models.service import ServicePool, served

    r = get_recipe(name) if isinstance(name, str) else name
    if isinstance(name, str):  # its settings written out in the run's config.yaml, defaults included
        cfg = with_resolved_settings(cfg, name)
    ctx = RunContext(cfg, Path(run_dir), resume, report or (lambda phase, info: None), budget_s, sandbox=sandbox)
    with ServicePool(served(cfg.models)):  # the run's judge and user models, by name (docs/second_model.md)
        return asyncio.run(_run(r, ctx, title or r.title))


WALL_FILE = "wall.json"  # the wall time of every segment of a run (an interrupted one included)


def _earlier_wall_s(run_dir: Path) -> float:
    p = run_dir / WALL_FILE
    return sum(json.loads(p.read_text()).get("segments_s", [])) if p.is_file() else 0.0


def _record_segment(run_dir: Path, seconds: float) -> None:
    """Append this segment's wall time, so a resumed run's summary counts every segment."""
    if not run_dir.is_dir():
        return
    p = run_dir / WALL_FILE
    segs = json.loads(p.read_text()).get("segments_s", []) if p.is_file() else []
    p.write_text(json.dumps({"segments_s": [*segs, seconds]}))


async def _run(r: Recipe, ctx: RunContext, title: str) -> dict:
    import torch

    cfg, run_dir = ctx.cfg, ctx.run_dir
    t0 = time.perf_counter()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    with ctx.phase("splits"):
        ctx.splits = r.splits(cfg)  # first: it refuses repeated task ids before anything is written
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, RunDir(run_dir).config)
    given = ctx.sandbox
    if r.sandboxed:
        from posttrain.recipes.cluster import run_sandbox

        ctx.sandbox = run_sandbox(cfg, ctx.sandbox)  # one pool per Ray node for cluster runs
    if ctx.splits is not None:
        pin_splits(ctx.splits, run_dir)  # replay, postmortem and eval read these exact tasks back
        from posttrain.train.rl import verify_concurrency
        from posttrain.verifiers.overlong import make_overlong
        from posttrain.verifiers.run import VerifierRunner

        # the run's one runner, RL's and its evals': evals read `passed`, never the reward (format weight,
        # overlong penalty); the overlong gate applies to both, so the "before" eval gates as RL does
        ctx.runner = VerifierRunner(ctx.sandbox, concurrency=verify_concurrency(cfg), retries=cfg.sandbox.retries,
                                    format_weight=cfg.rl.format_weight, overlong=make_overlong(cfg))
    try:
        with ctx.phase("base"):
            ctx.model, ctx.tok = await r.base(ctx)
        with ctx.phase("sft"):
            ctx.model, ctx.tok = await r.warm_up(ctx)
        with ctx.phase("eval_before"):
            before = await r.evaluate(ctx, "before")
        with ctx.phase("train"):
            await r.train(ctx)
        with ctx.phase("eval_after"):
            after = await r.evaluate(ctx, "after")
        summary = r.summarize(ctx, before, after)
        prev = run_dir / r.summary_file
        # every segment of a resumed run: interrupted ones leave no summary, only their wall.json entry
        summary.setdefault("wall_s", (_earlier_wall_s(run_dir) if ctx.resume else 0.0) + time.perf_counter() - t0)
        summary["phase_s"] = dict(ctx.phase_s)
        r.finish(ctx, summary)
        prev.write_text(json.dumps(summary, indent=2, default=str))
    finally:
        _record_segment(run_dir, time.perf_counter() - t0)
        if ctx.state is not None:
            ctx.state.metrics.close()
            ctx.state.store.close()
        if ctx.sandbox is not given and not cfg.cluster.address and cfg.sandbox.concurrency:
            await ctx.sandbox.close()  # this run's own pool (run_sandbox), not the process-wide one
    from posttrain.eval.run_report import write_run_report

    write_run_report(run_dir, title=title)  # report.html, self-contained
    return summary
