"""The quickstart: the whole post-training story on the embedded default, end to end.

    summary = run_quickstart(load_config(None, base=QUICKSTART_DEFAULTS), Path("runs/quickstart"))

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

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Callable

from posttrain.config import RunConfig, dump_config
from posttrain.eval.heldout import HeldoutResult, evaluate_heldout, paired_mcnemar
from posttrain.models.base import build_base
from posttrain.recipes.presets import load_preset
from posttrain.tasks.splits import Splits, make_splits, pin_splits
from posttrain.types import Task

Report = Callable[[str, dict], None]  # phase, info -> progress display

# What `posttrain quickstart` sets over the RunConfig defaults: presets/quickstart.yaml.
QUICKSTART_DEFAULTS: dict[str, Any] = load_preset("quickstart")

# `posttrain quickstart --model NAME`: the preset each real catalog model runs (presets/NAME.yaml).
MODEL_PRESETS: dict[str, str] = {"smollm2-135m-instruct": "smollm2"}


def models_home() -> Path:
    """Where `--model NAME` looks for (and converts) catalog models: $POSTTRAIN_MODELS_DIR/NAME."""
    import os

    return Path(os.environ.get("POSTTRAIN_MODELS_DIR", Path.home() / ".cache" / "posttrain" / "models"))


def resolve_model(model: str, convert: bool = True) -> tuple[str, Path]:
    """`--model` -> (catalog name, HF directory). A directory names its model in the manifest
    `posttrain models get` writes; a catalog name is converted into `models_home()` on first use."""
    from posttrain.errors import ConfigError

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
    out = models_home() / model
    if not (out / "config.json").is_file():
        if not convert:
            raise ConfigError(f"model {model} is not converted: run `posttrain models get {model} --out {out}`")
        from posttrain.models.catalog import get_real_model

        print(f"converting {model} into {out} (once; `posttrain models get` does the same)", flush=True)
        get_real_model(model, out)
    return model, out


def model_preset_base(model: str | None, model_dir: str | Path | None = None, preset: str | None = None) -> dict:
    """The config tree of `quickstart --model MODEL [--preset P]`: the preset with `model.path` set."""
    if model is not None and model_dir is None:
        model, model_dir = resolve_model(model)
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
    out = []
    for d in sorted({t.domain for t in splits.rl}):
        pool = [t for t in splits.rl if t.domain == d]
        out += rng.sample(pool, min(cfg.sft.val_per_domain, len(pool)))
    return out


async def sft_phase(cfg: RunConfig, run_dir: Path, splits: Splits, report: Report, runner: Any) -> tuple[Any, Any]:
    """SFT on oracle demonstrations; with `sft.stop_at_pass`, stop at the first check where
    validation pass@1 (mean over domains) reaches it. The tiny model's SFT curve has a sharp,
    seed-dependent phase transition, so a fixed step count lands anywhere from 8% to 99%;
    stopping on a measured level gives RL the same starting point on every seed."""
    import copy

    from posttrain.models import load_policy, save_policy
    from posttrain.rollout import make_engine
    from posttrain.eval.heldout import evaluate_heldout_mixed
    from posttrain.train.sft import SupervisedLoop, demo_sequences

    out = run_dir / "sft-model"
    if (out / "config.json").is_file():
        return load_policy(out)
    model, tok = build_base(cfg, run_dir)
    s = cfg.sft
    seqs = demo_sequences(tok, [(t.prompt, t.oracle) for t in splits.sft])
    loop = SupervisedLoop(model, tok.pad_token_id, seqs, s.steps, s.lr, s.batch_size, s.warmup_steps, cfg.seed,
                          s.weight_decay)
    val = validation_tasks(cfg, splits) if s.stop_at_pass is not None else []
    checks: list[dict] = []
    prev, chosen = None, None  # the previous check's weights; the step finally kept
    for step in range(s.steps):
        report("sft", {"step": step + 1, "total": s.steps, "loss": loop.step()})
        if val and ((step + 1) % s.check_every == 0 or step + 1 == s.steps):
            model.eval()
            eng = make_engine(cfg.engine.name, copy.deepcopy(model), tok, **cfg.engine.args)
            res = await evaluate_heldout_mixed(eng, tok, val, runner, cfg.eval.max_new_tokens, 0, cfg.agent)
            level = res.mean_over_domains()
            checks.append({"step": step + 1, "pass@1": level, "domains": res.by_domain()})
            report("sft_check", checks[-1])
            if level >= s.stop_at_pass:
                # The curve can jump across the level between two checks: keep whichever of
                # the last two checkpoints lies closer to it.
                if prev is not None and s.stop_at_pass - checks[-2]["pass@1"] < level - s.stop_at_pass:
                    model.load_state_dict(prev)
                    chosen = checks[-2]["step"]
                break
            prev = copy.deepcopy(model.state_dict())
    model.eval()
    (run_dir / "sft_losses.json").write_text(json.dumps(loop.losses))
    from posttrain.store.trackers.base import log_phase

    log_phase(cfg, run_dir, "sft", [{"loss": x} for x in loop.losses])  # tensorboard (log.trackers): sft/loss
    if val:
        kept = chosen or (checks[-1]["step"] if checks else len(loop.losses))
        (run_dir / "sft_checks.json").write_text(json.dumps({"stop_at_pass": s.stop_at_pass, "kept_step": kept,
                                                             "checks": checks}))
    save_policy(model, tok, out)
    return model, tok


async def eval_phase(name: str, run_dir: Path, engine: Any, tok: Any, tasks: list[Task], runner: Any,
               cfg: RunConfig, report: Report) -> HeldoutResult:
    path = run_dir / f"eval_{name}.json"
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


def summarize(before: HeldoutResult, after: HeldoutResult, wall_s: float, cfg: RunConfig, run_dir: Path) -> dict:
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
        "wall_s": wall_s,
    }


def run_quickstart(cfg: RunConfig, run_dir: Path, resume: bool = False, report: Report | None = None,
                   sandbox: Any = None, rl_budget_s: float | None = None) -> dict:
    """Run every phase in one event loop (the sandbox pool and verifier runner live on it).
    `rl_budget_s` ends RL after that many seconds (equal-wall-time comparisons)."""
    return asyncio.run(_quickstart(cfg, run_dir, resume, report, sandbox, rl_budget_s))


def _tokenizer(cfg: RunConfig) -> Any:
    """The run's tokenizer without loading its model (the tiny default's is built in code)."""
    if cfg.model.path is None:
        from posttrain.models.tiny import build_tokenizer

        return build_tokenizer()
    from transformers import AutoTokenizer

    from posttrain.models.io import hf_model_dir

    return AutoTokenizer.from_pretrained(hf_model_dir(cfg.model.path))


async def _quickstart(cfg: RunConfig, run_dir: Path, resume: bool, report: Report | None, sandbox: Any,
                      rl_budget_s: float | None = None) -> dict:
    import copy

    import torch

    from posttrain.recipes.cluster import cluster_engine_factory, run_sandbox
    from posttrain.rollout import make_engine
    from posttrain.train.rl import build_state, train_rl
    from posttrain.verifiers.run import VerifierRunner

    t0 = time.perf_counter()
    report = report or (lambda phase, info: None)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    splits = make_splits(cfg)  # first: it refuses repeated task ids, and config.yaml is written only after the checks
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, run_dir / "config.yaml")
    sandbox = run_sandbox(cfg, sandbox)  # one pool per Ray node for cluster runs, behind the Sandbox protocol
    pin_splits(splits, run_dir)
    runner = VerifierRunner(sandbox, concurrency=4, retries=cfg.sandbox.retries)
    from posttrain.rollout.tokenizer_checks import check_oracles_roundtrip

    # SFT demonstrations and the format rule need every oracle to be text this tokenizer can emit
    check_oracles_roundtrip(_tokenizer(cfg), [*splits.train, *splits.held_out])
    if cfg.sft.steps == 0:  # a pretrained instruct model starts RL from its own behaviour: no copy, no warm-up
        model, tok = build_base(cfg, run_dir)
    else:
        model, tok = await sft_phase(cfg, run_dir, splits, report, runner)
    eng = make_engine(cfg.engine.name, copy.deepcopy(model), tok, **cfg.engine.args)
    before = await eval_phase("before", run_dir, eng, tok, splits.held_out, runner, cfg, report)
    report("before", {"pass@1": before.by_domain()})
    st = build_state(cfg, run_dir, model, tok, splits.rl, splits.held_out, sandbox, resume=resume,
                     engine_factory=cluster_engine_factory(cfg))
    await train_rl(st, on_step=lambda s, row: report("rl", {"step": s + 1, "total": cfg.rl.steps, **row}),
                   budget_s=rl_budget_s)
    after = await eval_phase("after", run_dir, st.engine, tok, splits.held_out, st.runner, cfg, report)
    from posttrain.recipes.report import add_intervals, write_report

    summary = add_intervals(summarize(before, after, time.perf_counter() - t0, cfg, run_dir), before, after)
    summary["warnings"] = dict(st.warnings)
    if resume and (run_dir / "summary.json").is_file():
        summary["wall_s"] += json.loads((run_dir / "summary.json").read_text()).get("wall_s", 0.0)
    history = st.metrics.read()
    plot_rewards(run_dir, history, before, after)
    from posttrain.schedule.plots import plot_scheduler

    plot_scheduler(run_dir, history)  # the scheduler's page of the run report
    from posttrain.distributed.plots import plot_cluster  # no Ray: it reads the metrics rows

    plot_cluster(run_dir, history)  # cluster.png, only when the run used a Ray cluster
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    write_report(run_dir, summary, Path(cfg.model.path).name if cfg.model.path else "tiny default model")
    st.metrics.close()
    st.store.close()
    from posttrain.eval.run_report import write_run_report

    write_run_report(run_dir, title=f"posttrain quickstart: {cfg.name}")  # report.html, self-contained
    return summary
