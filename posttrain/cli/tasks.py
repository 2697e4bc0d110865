"""`posttrain tasks ...`: list, generate, validate, import and soundness-check task domains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from posttrain.cli.common import load_plugins, plugin_option

tasks_app = typer.Typer(help="Task domains: list, generate, validate, import, soundness check.", no_args_is_help=True)


def _domains(names: list[str]) -> list[str]:
    from posttrain.registry import registry

    known = registry("domain").names()
    if names in ([], ["all"]):
        return known
    from posttrain.config_check import did_you_mean
    from posttrain.errors import ConfigError

    for n in names:
        if n not in known:
            from posttrain.config_check import unknown_domain_error

            if any(n.startswith(p) for p in registry("domain_family").names()):  # a family's own line (rg-: its generators)
                raise unknown_domain_error(n, "domain")
            raise ConfigError(f"unknown domain {n!r}{did_you_mean(n, known)}; known: {', '.join(known)} "
                              "(a task file? give its path ending in .jsonl or .yaml)")
    return names


@tasks_app.command("list")
def list_domains() -> None:
    """Print the registered domains."""
    for name in _domains([]):
        typer.echo(name)


@tasks_app.command("check")
def check(
    domains: List[str] = typer.Argument(None, help="Domain names, task files (.jsonl/.yaml), or 'all' (default)."),
    n: int = typer.Option(20, "--n", min=1, help="Tasks per domain for the oracle/empty/wrong check."),
    repeats: int = typer.Option(2, "--repeats", min=1, help="Scores per (task, mode) and per (task, probe), for the flake rate."),
    seed: int = typer.Option(0, "--seed"),
    difficulty: float = typer.Option(1.0, "--difficulty"),
    probe_n: int = typer.Option(4, "--probe-n", min=0, help="Tasks per domain for the hack probes (0: no probes)."),
    only: List[str] = typer.Option([], "--probe", help="Run only this probe (repeatable; default: every probe)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per domain."),
    plugin: List[Path] = plugin_option(),
) -> None:
    """Oracle must score 1.0, empty 0, wrong < 1; through the RL scoring path no hack probe may score a full
    1.0 (hack_pass=0; partial credit, hack_nonzero, is reported but allowed), honest answers beside a probe keep
    their score (harmed=0), flake and infra rates 0. Exit 1 if any domain is unsound (docs/tasks.md, Soundness)."""
    import asyncio

    load_plugins(plugin)

    from posttrain.verifiers.soundness.check import check_domain_with_probes, check_file_with_probes
    from posttrain.verifiers.soundness.probe_check import table

    unsound = []
    files = [d for d in domains or [] if Path(d).suffix in (".jsonl", ".yaml", ".yml")]
    results = []
    for f in files:
        results += asyncio.run(check_file_with_probes(Path(f), n, repeats, seed, probe_n, set(only) or None))
    names = [d for d in domains or [] if d not in files]
    if not files or names:
        for name in _domains(names):
            results.append(asyncio.run(check_domain_with_probes(name, n, repeats, seed, difficulty, probe_n,
                                                                set(only) or None)))
    for report, probes in results:
        name = report.domain
        sound = report.sound and (probes is None or probes.sound)
        if as_json:
            row = {k: v for k, v in report.as_json().items() if k != "failures"}
            if probes is not None:
                row.update(hack_pass_rate=probes.hack_pass_rate, oracle_rl_pass_rate=probes.oracle_rl_pass_rate,
                           probe_flake_rate=probes.flake_rate, hack=probes.as_json())
            typer.echo(json.dumps({**row, "sound": sound}))
        else:
            typer.echo(f"{name:<12} n={report.n:<4} oracle={report.oracle_pass_rate:.3f} empty={report.empty_pass_rate:.3f} "
                       f"wrong={report.wrong_pass_rate:.3f} flake={report.flake_rate:.3f} infra={report.infra_error_rate:.3f} "
                       f"{'ok' if sound else 'UNSOUND'}")
            for f in report.failures:
                typer.echo(f"  {f}")
            for line in table(probes) if probes is not None else []:
                typer.echo(line)
        if not sound:
            unsound.append(name)
    if unsound:
        raise typer.Exit(1)


@tasks_app.command("generate")
def generate(domain: str, out: Path = typer.Option(..., "--out", help=".jsonl or .yaml"), n: int = typer.Option(100, "--n", min=1),
             seed: int = typer.Option(0, "--seed"), difficulty: float = typer.Option(1.0, "--difficulty"),
             plugin: List[Path] = plugin_option()) -> None:
    """Write `n` seeded tasks of DOMAIN to a task file."""
    from posttrain.tasks import generate_domain
    from posttrain.tasks.io import save_tasks

    load_plugins(plugin)
    _domains([domain])
    typer.echo(str(save_tasks(generate_domain(domain, n, seed, difficulty), out)))


@tasks_app.command("validate")
def validate(path: Path, plugin: List[Path] = plugin_option()) -> None:
    """Load a task file and check its verifiers and tools are registered; print the task count, or the
    first error (file, line, field)."""
    from posttrain.config_check import check_task_file
    from posttrain.tasks.io import load_tasks

    load_plugins(plugin)
    tasks = load_tasks(path)  # a parse error names the file, line and field
    check_task_file(path)  # the names, as a run's tasks.files are checked: a file that passes here trains
    typer.echo(f"{path}: {len(tasks)} tasks ok")


@tasks_app.command("import")
def import_tasks(path: Path, out: Path = typer.Option(..., "--out", help=".jsonl or .yaml"),
                 fmt: str = typer.Option("auto", "--format", help="harbor | rows | auto (folder -> harbor, file -> rows)"),
                 verifier: Optional[str] = typer.Option(None, "--verifier", help="rows: force a verifier name"),
                 environment: str = typer.Option("build", "--environment", help="harbor: build | host (build the Dockerfile's image, or run on the host image)"),
                 allow_unreproducible: bool = typer.Option(False, "--allow-unreproducible", help="harbor: skip Dockerfile lines that cannot be reproduced instead of failing"),
                 plugin: List[Path] = plugin_option()) -> None:
    """Import Harbor/Terminal-Bench task folders or TRL/verl JSONL rows into a task file."""
    from posttrain.errors import ConfigError
    from posttrain.registry import registry
    from posttrain.tasks.io import save_tasks

    load_plugins(plugin)
    if verifier is not None and verifier not in registry("verifier").names():  # refused before writing --out
        raise ConfigError(f"--verifier {verifier!r} is not registered; known: {', '.join(registry('verifier').names())} "
                          "(a plugin? pass --plugin FILE)")

    if fmt == "auto":
        fmt = "harbor" if path.is_dir() else "rows"
    if fmt == "harbor":
        from posttrain.tasks.harbor import load_harbor_tasks

        tasks = load_harbor_tasks(path, environment, allow_unreproducible)
    elif fmt == "rows":
        from posttrain.tasks.trl_rows import load_trl_rows

        tasks = load_trl_rows(path, verifier=verifier)
    else:
        raise ConfigError(f"--format {fmt!r}: expected harbor, rows or auto")
    save_tasks(tasks, out)
    typer.echo(f"{out}: {len(tasks)} tasks")


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
