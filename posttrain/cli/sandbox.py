"""`posttrain sandbox …`: run a command in the sandbox, benchmark it, build images."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer


def register(app: typer.Typer) -> None:
    grp = typer.Typer(help="Isolated execution of untrusted code (bubblewrap namespaces, cgroups, seccomp).", no_args_is_help=True)
    image = typer.Typer(help="Content-addressed sandbox images.", no_args_is_help=True)
    grp.add_typer(image, name="image")
    app.add_typer(grp, name="sandbox")

    @grp.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": False})
    def exec_cmd(
        cmd: List[str] = typer.Argument(..., help="the command and its arguments (after --)"),
        time_limit: float = typer.Option(10.0, "--time-limit", help="wall-clock seconds"),
        memory_mb: int = typer.Option(512, "--memory-mb", help="memory limit in MB"),
        image_: str = typer.Option("host", "--image", help="'host' or an image digest"),
        mode: str = typer.Option("auto", "--mode", help="auto | pooled | fresh"),
        as_json: bool = typer.Option(False, "--json", help="print the ExecResult as JSON"),
    ) -> None:
        """Run CMD in a fresh sandbox: stdin passes through; exit with its code."""
        from posttrain.sandbox.cli_impl import run_exec

        code = run_exec(cmd, time_limit, memory_mb, image_, mode, as_json, sys.stdin)
        raise typer.Exit(code)

    @grp.command("bench")
    def bench_cmd(
        as_json: bool = typer.Option(False, "--json", help="print the results as JSON"),
        n: int = typer.Option(200, "--n", help="executions per mode"),
    ) -> None:
        """Latency percentiles and throughput of each execution mode, side by side."""
        from posttrain.sandbox.bench import print_bench

        print_bench(n, as_json)

    @image.command("build")
    def image_build(spec: str = typer.Argument(..., help="image spec YAML")) -> None:
        """Build (or reuse) the image a spec describes; print its directory and digest."""
        from posttrain.sandbox.image_build import build_image

        img = build_image(spec)
        typer.echo(f"{img.digest}\t{img.layer.parent if img.layer else ''}")
