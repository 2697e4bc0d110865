"""`posttrain quickstart` and `posttrain rl`: the end-to-end run and the RL loop on any config."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


# What a user should expect, from docs/benchmarks.md ("Foundation"); each phase prints its own eta as it runs
QUICKSTART_TIME = ("posttrain quickstart: about 5-6 min on 2 cores (measured 5 min 26 s, 271 CPU-s, on a shared 2-core "
                   "VM; docs/benchmarks.md), longer on a busy machine; each phase shows its progress and an eta")


def _print_summary(summary: dict, run_dir: Path, stage: str = "RL") -> None:
    from rich.console import Console
    from rich.table import Table

    if "p_value" not in summary:  # eval.before / eval.after off: no comparison
        ran = [f"{k} {stage} pass@1 {summary[k]['pass@1']:.3f}" for k in ("before", "after") if k in summary]
        typer.echo(f"held-out comparison skipped (eval.before/eval.after); {'; '.join(ran) or 'no held-out eval ran'}; "
                   f"run directory {run_dir}")
        return
    ev = summary.get("eval", {})
    how = "greedy" if not ev.get("temperature") else f"one sample at T={ev['temperature']}, seed {ev.get('seed')}"
    t = Table(title=f"held-out pass@1 ({how}), before vs after {stage}")
    t.add_column("domain"), t.add_column(f"before {stage}", justify="right"), t.add_column(f"after {stage}", justify="right")
    t.add_column("delta", justify="right"), t.add_column("McNemar p", justify="right")
    for d, b in summary["before"]["domains"].items():
        a = summary["after"]["domains"][d]
        t.add_row(d, f"{b:.3f}", f"{a:.3f}", f"{a - b:+.3f}", f"{summary['domain_p_values'][d]:.2g}")
    b, a = summary["before"]["pass@1"], summary["after"]["pass@1"]
    t.add_row("[bold]mean", f"{b:.3f}", f"{a:.3f}", f"{a - b:+.3f}", f"{summary['p_value']:.2g}")
    c = Console()
    c.print(t)
    _print_generalisation(c, summary.get("generalisation"))
    sft = summary.get("sft", {})
    if "validation_pass@1" in sft:
        c.print(f"SFT warm-up: {sft['steps']} steps, stopped at validation pass@1 {sft['validation_pass@1']:.3f} "
                f"(target {sft['stop_at_pass']}; validation tasks come from the RL pool, never the held-out split)")
    f = summary["flips"]
    c.print(f"{summary['n_tasks']} held-out tasks; flips fail->pass {f['fail_to_pass']}, pass->fail {f['pass_to_fail']}; "
            f"wall {summary['wall_s']:.0f}s; run directory {run_dir}")


def _print_generalisation(c, gen: dict | None) -> None:
    """Trained vs held-out domains (never trained on), when the config held some out."""
    if not gen:
        return
    from rich.table import Table

    t = Table(title="trained vs held-out domains (never trained on): mean pass@1, paired delta, 95% CI, McNemar p")
    for col in ("domains", "tasks", "before", "after", "delta", "95% CI", "p"):
        t.add_column(col, justify="left" if col == "domains" else "right", no_wrap=True)
    for key, label in (("trained_domains", "trained"), ("held_out_domains", "held out")):
        g = gen[key]
        lo, hi = g["ci95"]
        t.add_row(f"{label} ({len(g['domains'])})", str(g["n_tasks"]), f"{g['before']:.3f}", f"{g['after']:.3f}",
                  f"{g['delta']:+.3f}", f"[{lo:+.3f}, {hi:+.3f}]", f"{g['p_value']:.2g}")
    c.print(t)


def _run(config: Optional[Path], overrides: List[str], out: Optional[Path], resume: Optional[Path],
         base: dict | None = None, overwrite: bool = False, command: str = "posttrain rl",
         plugins: List[Path] = ()) -> None:
    from posttrain.cli.common import launch
    from posttrain.config import load_config
    from posttrain.store.run import RunDir
    from posttrain.store.run_dir import claim_run_dir

    if resume is not None:
        claim_run_dir(resume, resume=True)  # a run directory, before its config.yaml is read
        cfg = load_config(RunDir(resume).config, overrides, plugins=plugins)
        run_dir = resume
    else:  # --plugin files imported before the config's registry names are checked
        cfg = load_config(config, overrides, base=base, plugins=plugins)
        run_dir = out or Path(cfg.out_dir) / cfg.name
    if cfg.rl.loss.name == "distill":
        from posttrain.errors import ConfigError

        raise ConfigError("rl.loss=distill needs per-token teacher advantages: run it with `posttrain distill CONFIG` "
                          "(docs/second_model.md), not posttrain rl")
    summary = launch("rl", cfg, run_dir, command, resume=resume is not None, overwrite=overwrite)
    _print_summary(summary, run_dir)
    _fail_on_unjudged(summary, run_dir)


def _fail_on_unjudged(summary: dict, run_dir: Path) -> None:
    """Exit non-zero when the held-out evaluation could not judge more than the summary's
    `infra_error_threshold` (rl.infra_error.threshold) of its tasks: a before/after table over the
    rest would read as success."""
    from posttrain.errors import PosttrainError

    threshold = summary.get("infra_error_threshold", 1.0)
    judged = summary.get("n_tasks", 0)
    for side, n in (summary.get("infra_errors") or {}).items():
        if n and n / (n + judged) > threshold:
            raise PosttrainError(f"held-out evaluation {side} RL: {n} of {n + judged} tasks were infrastructure errors, "
                                 f"over rl.infra_error.threshold {threshold:.0%}; the table compares too few tasks "
                                 f"(the causes: `posttrain replay {run_dir}` or `posttrain view {run_dir}`)")


def _agent(config: Optional[Path], overrides: List[str], out: Optional[Path], overwrite: bool) -> None:
    from posttrain.cli.common import launch
    from posttrain.recipes.agent import agent_config, format_agent_summary

    cfg = agent_config(config, overrides)
    run_dir = out or Path(cfg.out_dir) / cfg.name
    summary = launch("agent", cfg, run_dir, "posttrain quickstart --agent", overwrite=overwrite)
    typer.echo("\n".join(format_agent_summary(summary)))
    typer.echo(f"run directory {run_dir}")


def _vision(config: Optional[Path], overrides: List[str], out: Optional[Path], overwrite: bool) -> None:
    from posttrain.cli.common import launch
    from posttrain.recipes.vision import format_summary, vision_config

    cfg = vision_config(config, overrides)
    run_dir = out or Path(cfg.out_dir) / cfg.name
    summary = launch("vision", cfg, run_dir, "posttrain quickstart --vision", overwrite=overwrite)
    typer.echo("\n".join(format_summary(summary, run_dir)))


def register(app: typer.Typer) -> None:
    @app.command()
    def quickstart(
        out: Optional[Path] = typer.Option(None, "--out", help="run directory (default runs/quickstart)"),
        resume: Optional[Path] = typer.Option(None, "--resume", help="continue an interrupted quickstart run"),
        overrides: List[str] = typer.Argument(None, help="dotted overrides, e.g. rl.steps=20"),
        vision: bool = typer.Option(False, "--vision", help="the image-task quickstart (tiny VLM; chart, ui, drawing)"),
        agent: bool = typer.Option(False, "--agent", help="the agent quickstart: RL teaches the tiny model to use "
                                   "the calculator (tools domain, multi-turn)"),
        config: Optional[Path] = typer.Option(None, "--config", help="with --vision/--agent: a config YAML over its "
                                              "defaults"),
        overwrite: bool = typer.Option(False, "--overwrite", help="replace an earlier run in the run directory"),
        model: Optional[str] = typer.Option(None, "--model", help="a real model: catalog name (smollm2-135m-instruct) "
                                            "or its converted directory; runs its preset on real benchmarks"),
        preset: Optional[str] = typer.Option(None, "--preset", help="a recipe preset (posttrain/recipes/presets)"),
    ) -> None:
        """Build the tiny model, SFT, evaluate, RL, evaluate again, and print the before/after table.
        With --model: the real-model recipe (baseline eval, GRPO with LoRA, eval again, McNemar)."""
        if (vision or agent) and resume is not None:  # neither recipe can continue a run: say so, not start afresh
            from posttrain.errors import ConfigError

            raise ConfigError(f"--resume: `posttrain quickstart {'--vision' if vision else '--agent'}` does not resume; "
                              "rerun it with --overwrite")
        if agent:
            _agent(config, overrides or [], out, overwrite)
            return
        if vision:
            _vision(config, overrides or [], out, overwrite)
            return
        import copy

        from posttrain.recipes.quickstart import QUICKSTART_DEFAULTS, model_preset_base

        base = copy.deepcopy(QUICKSTART_DEFAULTS)
        if (model or preset) and resume is None:  # a resumed run reads its own config.yaml
            base = model_preset_base(model, preset=preset)
        elif resume is None and not overrides:
            typer.echo(QUICKSTART_TIME, err=True)
        _run(None, overrides or [], out, resume, base=base, overwrite=overwrite, command="posttrain quickstart")

    @app.command()
    def rl(
        config: Optional[Path] = typer.Argument(None, help="run config YAML (optional with --resume)"),
        overrides: List[str] = typer.Argument(None, help="dotted overrides, e.g. rl.optim.lr=3e-4"),
        out: Optional[Path] = typer.Option(None, "--out", help="run directory (default <out_dir>/<name>)"),
        resume: Optional[Path] = typer.Option(None, "--resume", help="continue the run in this directory"),
        overwrite: bool = typer.Option(False, "--overwrite", help="replace an earlier run in the run directory"),
        plugin: List[Path] = typer.Option([], "--plugin", help="a .py file defining extra domains/verifiers (repeatable)"),
    ) -> None:
        """Run the RL loop (SFT warm-up if configured, RL, before/after evaluation) on CONFIG."""
        overrides = list(overrides or [])
        if config is not None and "=" in str(config) and not config.exists():
            overrides.insert(0, str(config))  # `rl --resume RUN key=value`: no config file given
            config = None
        if config is None and resume is None:
            from posttrain.errors import ConfigError

            raise ConfigError("posttrain rl needs a CONFIG file (or --resume RUN)")
        _run(config, overrides, out, resume, overwrite=overwrite, plugins=plugin)
