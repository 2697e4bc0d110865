"""The `rl` recipe (`posttrain quickstart`, `posttrain rl`): the whole post-training story, end to end.

    summary = run_recipe("rl", load_config(None, base=QUICKSTART_DEFAULTS), Path("runs/quickstart"))

Its stages, in the order recipes/pipeline.py runs them:
1. build the tiny policy, save it with `save_pretrained`, load it back with `from_pretrained`
2. generate seeded train tasks and a disjoint held-out split per domain
3. SFT warm-up on oracle demonstrations
4. evaluate held-out pass@1 ("before" = after SFT, before RL)
5. GRPO-family RL (rl.py)
6. evaluate again; paired exact McNemar test across tasks
7/8. run directory with config, metrics, TensorBoard, checkpoints, trajectories,
     reward-curve PNG and summary.json

Every phase writes its result into the run directory, so `resume=True` skips what is done.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field

from posttrain.config import RunConfig, Section
from posttrain.config_recipe import recipe_settings
from posttrain.errors import ConfigError
from posttrain.eval.heldout import HeldoutResult, paired_mcnemar
from posttrain.models.base import build_base
from posttrain.recipes.pipeline import Report, RunContext, recipe
from posttrain.recipes.presets import load_preset
from posttrain.store.run import SUMMARY, RunDir
from posttrain.tasks.splits import Splits, make_splits
from posttrain.types import Task, is_multi_step

# What `posttrain quickstart` sets over the RunConfig defaults: presets/quickstart.yaml.
QUICKSTART_DEFAULTS: dict[str, Any] = load_preset("quickstart")

# `posttrain quickstart --model NAME`: the preset each real catalog model runs (presets/NAME.yaml).
MODEL_PRESETS: dict[str, str] = {"smollm2-135m-instruct": "smollm2"}


def quickstart_model(model: str, convert: bool = True) -> tuple[str, Path]:
    """`quickstart --model` -> (catalog name, HF directory): the name picks the preset. A directory names
    its model in the manifest `posttrain models get` writes; a catalog name is converted into
    models_home() ($POSTTRAIN_MODELS_DIR, models/catalog.py) on first use."""
    p = Path(model)
    if p.is_dir():
        manifest = p / "posttrain-model.json"
        name = json.loads(manifest.read_text()).get("name", "") if manifest.is_file() else ""
        if name not in MODEL_PRESETS:
            raise ConfigError(f"quickstart --model {model}: no recipe preset for this model directory "
                              f"(known: {', '.join(MODEL_PRESETS)}); pass --preset NAME or run "
                              f"`posttrain rl CONFIG model.path={model}`")
        return name, p
    if model not in MODEL_PRESETS:
        raise ConfigError(f"quickstart --model {model!r}: not a directory and not a catalog model with a preset "
                          f"(known: {', '.join(MODEL_PRESETS)}; `posttrain models list`)")
    from posttrain.models.catalog import catalog_model_dir

    return model, catalog_model_dir(model, convert, echo=lambda line: print(line, flush=True))


def model_preset_base(model: str | None, model_dir: str | Path | None = None, preset: str | None = None) -> dict:
    """The config tree of `quickstart --model MODEL [--preset P]`: the preset with `model.path` set."""
    if model is not None and model_dir is None:
        model, model_dir = quickstart_model(model)
    base = load_preset(preset or MODEL_PRESETS.get(model or "", "smollm2"))
    if model_dir is not None:
        base.setdefault("model", {})["path"] = str(Path(model_dir).resolve())
    return base


def model_preset_config(model: str, model_dir: str | Path | None = None, overrides: list[str] | None = None,
                        preset: str | None = None) -> RunConfig:
    """The RunConfig of `quickstart --model MODEL`: its preset, `model.path`, then `overrides`."""
    from posttrain.config import load_config

    return load_config(None, overrides or [], base=model_preset_base(model, model_dir, preset))


def _save_eval(path: Path, res: HeldoutResult) -> None:
    completions = {t.task_id: t.completion_text for t in res.trajectories}  # report.html shows flips with them
    path.write_text(json.dumps({"passed": res.passed, "domain_of": res.domain_of, "infra_errors": res.infra_errors,
                                "completions": completions}))


def _load_eval(path: Path) -> HeldoutResult | None:
    if not path.is_file():
        return None
    d = json.loads(path.read_text())
    return HeldoutResult(d["passed"], d["domain_of"], [], d["infra_errors"])


def validation_tasks(cfg: RunConfig, splits: Splits) -> list[Task]:
    """A seeded sample of the RL pool per domain: the SFT stop rule looks at these, never at
    the held-out split, so choosing when to stop does not peek at the test set."""
    import random

    rng = random.Random(f"sft-val:{cfg.seed}")
    per_domain = recipe_settings(cfg, "rl").val_per_domain
    out = []
    for d in sorted({t.domain for t in splits.rl}):
        pool = [t for t in splits.rl if t.domain == d]
        out += rng.sample(pool, min(per_domain, len(pool)))
    return out


async def demonstrations(cfg: RunConfig, model: Any, tok: Any, tasks: list[Task], runner: Any) -> list[Any]:
    """`pack_sequences` rows of the SFT demonstrations: a one-step task's oracle is its one reply; a
    multi-step task's oracle is an action plan, acted out with its real tools (in a sandbox session
    where they need one) as the multi-turn conversation the episodes will have, tools shown the same
    way (rollout/agent/sft.py). Training on the plan's JSON as one reply would teach a format no
    episode accepts."""
    from posttrain.rollout.agent.sft import plan_demonstrations
    from posttrain.train.sft import demo_sequences

    multi = [t for t in tasks if is_multi_step(t)]
    seqs = demo_sequences(tok, [(t.prompt, t.oracle) for t in tasks if not is_multi_step(t)])
    context = getattr(model.config, "max_position_embeddings", None)
    if multi:
        sandbox = runner.ctx.sandbox if runner is not None else None
        seqs += await plan_demonstrations(tok, multi, max_len=context, sandbox=sandbox,
                                          tools_prompt=cfg.agent.tools_prompt, context=context)
    if not seqs:
        raise ConfigError(f"sft.steps={cfg.sft.steps}: none of the {len(tasks)} demonstration tasks gave a "
                          f"demonstration: each acted-out plan was longer than the model's context ({context} "
                          "tokens) or needed a sandbox session and none was given")
    return seqs


async def sft_phase(cfg: RunConfig, run_dir: Path, splits: Splits, report: Report, runner: Any,
                    base: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
    """SFT on oracle demonstrations; with `recipe.rl.stop_at_pass`, stop at the first check where
    validation pass@1 (mean over domains) reaches it. The tiny model's SFT curve has a sharp,
    seed-dependent phase transition, so a fixed step count lands anywhere from 8% to 99%;
    stopping on a measured level gives RL the same starting point on every seed."""
    import copy

    from posttrain.models import load_policy, save_policy
    from posttrain.rollout import make_engine
    from posttrain.eval.heldout import evaluate_heldout_mixed
    from posttrain.train.lora import apply_lora, export_model
    from posttrain.train.sft import SupervisedLoop

    out = RunDir(run_dir).sft_model
    if (out / "config.json").is_file():  # a resumed run: the warm-up is done
        return load_policy(out)
    s, stop = cfg.sft, recipe_settings(cfg, "rl")
    if not splits.sft:  # before the model loads: a warm-up with nothing to learn from is a config mistake
        doms = ", ".join(sorted({t.domain for t in splits.train})) or "none"
        raise ConfigError(f"sft.steps={s.steps}: the warm-up has no demonstration (tasks.sft_frac={cfg.tasks.sft_frac} "
                          f"of the training tasks with an oracle; domains: {doms}); set sft.steps=0 for RL alone")
    model, tok = base or build_base(cfg, run_dir)
    seqs = await demonstrations(cfg, model, tok, splits.sft, runner)
    # trainer.lora holds for the warm-up too: its adapters are merged into the saved sft-model, and RL
    # puts fresh ones on that. (Full fine-tuning here held the weights' gradients and AdamW states: 3x
    # the model, 4 GB more for Gemma 3 270M.)
    trained = apply_lora(model, cfg.trainer, cfg.seed) if cfg.trainer.lora is not None else model
    loop = SupervisedLoop(trained, tok.pad_token_id, seqs, s.steps, s.optim, s.batch_size, cfg.seed)
    val = validation_tasks(cfg, splits) if stop.stop_at_pass is not None else []
    checks: list[dict] = []
    prev, chosen = None, None  # the previous check's weights; the step finally kept
    for step in range(s.steps):
        report("sft", {"step": step + 1, "total": s.steps, "loss": loop.step()})
        if val and ((step + 1) % stop.check_every == 0 or step + 1 == s.steps):
            trained.eval()
            snapshot = export_model(trained) if trained is not model else copy.deepcopy(model)  # adapters merged
            eng = make_engine(cfg.engine.name, snapshot, tok, **cfg.engine.args)
            res = await evaluate_heldout_mixed(eng, tok, val, runner, cfg.eval.max_new_tokens, 0, cfg.agent)
            level = res.mean_over_domains()
            checks.append({"step": step + 1, "pass@1": level, "domains": res.by_domain()})
            report("sft_check", checks[-1])
            if level >= stop.stop_at_pass:
                # The curve can jump across the level between two checks: keep whichever of
                # the last two checkpoints lies closer to it.
                if prev is not None and stop.stop_at_pass - checks[-2]["pass@1"] < level - stop.stop_at_pass:
                    trained.load_state_dict(prev, strict=False)
                    chosen = checks[-2]["step"]
                break
            # what training changes (the adapters alone under LoRA), not a second copy of the frozen weights
            prev = {n: p.detach().clone() for n, p in trained.named_parameters() if p.requires_grad}
    trained.eval()
    model = export_model(trained) if trained is not model else model
    (run_dir / "sft_losses.json").write_text(json.dumps(loop.losses))
    from posttrain.store.trackers.base import log_phase

    log_phase(cfg, run_dir, "sft", [{"loss": x} for x in loop.losses])  # tensorboard (log.trackers): sft/loss
    if val:
        kept = chosen or (checks[-1]["step"] if checks else len(loop.losses))
        (run_dir / "sft_checks.json").write_text(json.dumps({"stop_at_pass": stop.stop_at_pass, "kept_step": kept,
                                                             "checks": checks}))
    save_policy(model, tok, out)
    return model, tok


async def eval_phase(name: str, run_dir: Path, engine: Any, tok: Any, tasks: list[Task], runner: Any,
               cfg: RunConfig, report: Report) -> HeldoutResult:
    path = RunDir(run_dir).eval_result(name)
    cached = _load_eval(path)
    if cached is not None:
        return cached
    report("eval", {"name": name, "n": len(tasks)})
    from posttrain.eval.heldout import evaluate_heldout_mixed  # multi-step tasks run as agent episodes

    res = await evaluate_heldout_mixed(engine, tok, tasks, runner, cfg.eval.max_new_tokens, 0, cfg.agent,
                                       temperature=cfg.eval.temperature, seed=cfg.eval.seed)
    _save_eval(path, res)
    return res


def plot_rewards(run_dir: Path, history: list[dict], before: HeldoutResult, after: HeldoutResult) -> Path:
    """reward_curve.png: EMA-smoothed training reward per domain, and held-out pass@1 bars with
    their values and 95% intervals (posttrain/eval/plots.py)."""
    from posttrain.eval.plots import recipe_reward_page

    n = {d: sum(1 for t in before.passed if before.domain_of[t] == d) for d in before.by_domain()}
    return recipe_reward_page(run_dir / "reward_curve.png", history, before.by_domain(), after.by_domain(), n)


def sft_record(run_dir: Path) -> dict:
    """How long the warm-up ran and, with the stop rule, the validation level it stopped at."""
    out: dict[str, Any] = {}
    if (run_dir / "sft_losses.json").is_file():
        out["steps"] = len(json.loads((run_dir / "sft_losses.json").read_text()))
    if (run_dir / "sft_checks.json").is_file():
        d = json.loads((run_dir / "sft_checks.json").read_text())
        out["stop_at_pass"] = d["stop_at_pass"]
        kept = [c for c in d["checks"] if c["step"] == d.get("kept_step")] or d["checks"][-1:]
        if kept:
            out["steps"] = kept[0]["step"]
            out["validation_pass@1"] = kept[0]["pass@1"]
    return out


def summarize(before: HeldoutResult, after: HeldoutResult, cfg: RunConfig, run_dir: Path) -> dict:
    overall = paired_mcnemar(before, after)
    return {
        "sft": sft_record(run_dir),
        "eval": {"temperature": cfg.eval.temperature, "seed": cfg.eval.seed, "samples_per_task": 1},
        "before": {"pass@1": before.mean_over_domains(), "domains": before.by_domain()},
        "after": {"pass@1": after.mean_over_domains(), "domains": after.by_domain()},
        "p_value": overall.p_value,
        "n_tasks": overall.n,
        "flips": {"pass_to_fail": overall.before_only, "fail_to_pass": overall.after_only},
        "domain_p_values": {d: paired_mcnemar(before, after, d).p_value for d in before.by_domain()},
        "infra_errors": {"before": before.infra_errors, "after": after.infra_errors},
        "infra_error_threshold": cfg.rl.infra_error.threshold,  # the CLI fails a table over too few judged tasks
        **_generalisation(before, after, cfg),
    }


def _generalisation(before: HeldoutResult, after: HeldoutResult, cfg: RunConfig) -> dict:
    """`generalisation`: trained vs held-out domains (`tasks.domains.X.held_out`), when the run holds any out."""
    from posttrain.eval.transfer import generalisation
    from posttrain.tasks.splits import held_out_domains

    held = held_out_domains(cfg)
    return {"generalisation": generalisation(before, after, held)} if held else {}


def skipped_eval_summary(before: HeldoutResult | None, after: HeldoutResult | None, cfg: RunConfig,
                         run_dir: Path) -> dict:
    """The summary of a run with eval.before or eval.after off: the one eval that ran, if any."""
    out: dict[str, Any] = {"sft": sft_record(run_dir), "eval": {"temperature": cfg.eval.temperature, "seed": cfg.eval.seed,
                                                               "before": cfg.eval.before, "after": cfg.eval.after}}
    for key, res in (("before", before), ("after", after)):
        if res is not None:
            out[key] = {"pass@1": res.mean_over_domains(), "domains": res.by_domain(), "infra_errors": res.infra_errors}
    return out


def run_quickstart(cfg: RunConfig, run_dir: Path, resume: bool = False, report: Report | None = None,
                   sandbox: Any = None, rl_budget_s: float | None = None) -> dict:
    """The `rl` recipe through the one pipeline (recipes/pipeline.py). `rl_budget_s` ends RL after
    that many seconds (equal-wall-time comparisons)."""
    from posttrain.recipes.pipeline import run_recipe

    return run_recipe("rl", cfg, run_dir, resume=resume, report=report, sandbox=sandbox, budget_s=rl_budget_s)


def drop_long_prompts(splits: Splits, tokenizer: Any, max_tokens: int) -> Splits:
    """`splits` without the training tasks whose chat-templated prompt is over `max_tokens`
    tokens (`rl.max_prompt_tokens`); they are listed in `dropped`. Held-out tasks all stay."""
    from posttrain.errors import ConfigError
    from posttrain.rollout.prompting import encode_prompt

    if max_tokens <= 0:
        return splits
    sizes = {t.id: len(encode_prompt(tokenizer, t.prompt)) for t in splits.train}  # [train] prompt tokens
    dropped = {tid: n for tid, n in sizes.items() if n > max_tokens}
    if len(dropped) == len(sizes) and sizes:
        raise ConfigError(f"rl.max_prompt_tokens={max_tokens} leaves no training task: the shortest prompt "
                          f"has {min(sizes.values())} tokens")
    keep = [t for t in splits.train if t.id not in dropped]
    return Splits(keep, splits.held_out, [t for t in splits.sft if t.id not in dropped], dropped)


def _tokenizer(cfg: RunConfig) -> Any:
    """The run's tokenizer without loading its model (the tiny default's is built in code)."""
    if cfg.model.path is None:
        from posttrain.models.tiny import build_tokenizer

        return build_tokenizer()
    from transformers import AutoTokenizer

    from posttrain.models.io import hf_model_dir

    return AutoTokenizer.from_pretrained(hf_model_dir(cfg.model.path))


class TextRLSettings(Section):
    """`recipe.rl:` (were sft.stop_at_pass, sft.check_every, sft.val_per_domain): the warm-up's stop rule,
    which `posttrain quickstart` and `posttrain rl` run and `posttrain sft` does not."""

    # stop once greedy pass@1 on a validation sample of the RL task pool (never the held-out split),
    # mean over domains, reaches this; None = run all sft.steps
    stop_at_pass: float | None = Field(default=None, gt=0.0, le=1.0)
    check_every: int = Field(default=50, ge=1)  # SFT steps between validation checks
    val_per_domain: int = Field(default=100, ge=1)  # validation tasks per domain
    # RL ends after this many minutes of its loop's wall time (a resumed run counts from the resume), or at
    # rl.steps if that comes first: equal-wall-time comparisons (benchmarks/vs_trl_smollm2.py). None: rl.steps.
    rl_minutes: float | None = Field(default=None, gt=0.0)


@recipe("rl", settings=TextRLSettings)
class TextRL:
    """Text tasks: splits -> base -> SFT on oracle demonstrations (with `recipe.rl.stop_at_pass`) -> eval ->
    GRPO-family RL (train/rl.py) -> eval -> paired McNemar (`posttrain quickstart`, `posttrain rl`)."""

    title = "posttrain quickstart"
    summary_file = SUMMARY
    sandboxed = True
    resumable = True

    def splits(self, cfg: RunConfig) -> Splits:
        splits = make_splits(cfg)
        splits = drop_long_prompts(splits, _tokenizer(cfg), cfg.rl.max_prompt_tokens) if cfg.rl.max_prompt_tokens else splits
        from posttrain.config_check import check_rl_splits

        check_rl_splits(cfg, splits)  # overlong policy and fixed order against the final splits
        return splits

    async def base(self, ctx: RunContext) -> tuple[Any, Any]:
        from posttrain.rollout.tokenizer_checks import check_oracles_roundtrip

        assert ctx.splits is not None
        if ctx.splits.dropped:
            ctx.report("log", {"line": f"rl.max_prompt_tokens={ctx.cfg.rl.max_prompt_tokens}: left out "
                                       f"{len(ctx.splits.dropped)} training task(s) with longer prompts (longest "
                                       f"{max(ctx.splits.dropped.values())} tokens); the held-out split keeps them"})  # SFT demonstrations and the format rule need every oracle to be text
        check_oracles_roundtrip(_tokenizer(ctx.cfg), [*ctx.splits.train, *ctx.splits.held_out])  # it can emit
        from posttrain.recipes.departures import departure_lines

        for line in departure_lines(ctx.cfg, has_file_tasks=bool(ctx.cfg.tasks.files or ctx.cfg.tasks.heldout_files)):
            ctx.report("log", {"line": line})  # every setting that differs from a plain GRPO run, and its off key
        return build_base(ctx.cfg, ctx.run_dir)

    async def warm_up(self, ctx: RunContext) -> tuple[Any, Any]:
        if ctx.cfg.sft.steps == 0:  # a pretrained instruct model starts RL from its own behaviour: no warm-up
            return ctx.model, ctx.tok
        assert ctx.splits is not None
        return await sft_phase(ctx.cfg, ctx.run_dir, ctx.splits, ctx.report, ctx.runner, (ctx.model, ctx.tok))

    async def evaluate(self, ctx: RunContext, when: str) -> HeldoutResult | None:
        import copy

        from posttrain.rollout import make_engine

        assert ctx.splits is not None
        cfg = ctx.cfg
        if not (cfg.eval.before if when == "before" else cfg.eval.after):
            ctx.report("log", {"line": f"held-out eval {when} RL skipped (eval.{when}=false)"})
            return None
        if when == "before":  # the warmed-up policy on its own engine; RL builds its engine from the same weights
            eng, runner = make_engine(cfg.engine.name, copy.deepcopy(ctx.model), ctx.tok, **cfg.engine.args), ctx.runner
        else:
            eng, runner = ctx.state.engine, ctx.state.runner
        res = await eval_phase(when, ctx.run_dir, eng, ctx.tok, ctx.splits.held_out, runner, cfg, ctx.report)
        if when == "before":
            ctx.report("before", {"pass@1": res.by_domain()})
        return res

    async def train(self, ctx: RunContext) -> None:
        from posttrain.recipes.cluster import cluster_engine_factory
        from posttrain.train.rl import train_rl

        st = ctx.rl_state(engine_factory=cluster_engine_factory(ctx.cfg))
        total = ctx.cfg.rl.steps
        minutes = recipe_settings(ctx.cfg, "rl").rl_minutes
        budgets = [b for b in (ctx.budget_s, minutes * 60 if minutes else None) if b is not None]
        await train_rl(st, on_step=lambda s, row: ctx.report("rl", {"step": s + 1, "total": total, **row}),
                       budget_s=min(budgets) if budgets else None)

    def summarize(self, ctx: RunContext, before: HeldoutResult | None, after: HeldoutResult | None) -> dict:
        from posttrain.recipes.report import add_intervals

        if before is None or after is None:  # eval.before / eval.after off: no comparison to make
            summary = skipped_eval_summary(before, after, ctx.cfg, ctx.run_dir)
        else:
            summary = add_intervals(summarize(before, after, ctx.cfg, ctx.run_dir), before, after)
        summary["warnings"] = dict(ctx.state.warnings)
        if ctx.splits is not None and ctx.splits.dropped:  # train tasks over rl.max_prompt_tokens
            summary["dropped_long_prompts"] = dict(ctx.splits.dropped)
        ctx.extra["evals"] = (before, after)
        return summary

    def finish(self, ctx: RunContext, summary: dict) -> None:
        from posttrain.distributed.plots import plot_cluster  # no Ray: it reads the metrics rows
        from posttrain.recipes.report import write_report
        from posttrain.schedule.plots import plot_scheduler

        cfg, run_dir = ctx.cfg, ctx.run_dir
        history = ctx.state.metrics.read()
        plot_scheduler(run_dir, history)  # the scheduler's page of the run report
        plot_cluster(run_dir, history)  # cluster.png, only when the run used a Ray cluster
        if None in ctx.extra["evals"]:  # eval.before / eval.after off: no before/after page
            return
        plot_rewards(run_dir, history, *ctx.extra["evals"])
        write_report(run_dir, summary, Path(cfg.model.path).name if cfg.model.path else "tiny default model")
