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
    def image_build(
        spec: str = typer.Argument(..., help="a Dockerfile, a Debian image spec YAML (base: bookworm), or a host-layer spec YAML"),
        allow_unreproducible: bool = typer.Option(False, "--allow-unreproducible", help="skip Dockerfile lines that cannot be reproduced (listed in the manifest) instead of failing"),
        verify: bool = typer.Option(False, "--verify", help="recompute every layer's content digest before reusing a cached image"),
    ) -> None:
        """Build (or reuse) the image a spec describes; print its digest and directory."""
        from posttrain.sandbox.image_cli import build_any

        digest, where = build_any(spec, allow_unreproducible, verify)
        typer.echo(f"{digest}\t{where}")

    @image.command("verify")
    def image_verify(digest: str = typer.Argument(..., help="image digest (or a unique prefix)")) -> None:
        """Recompute every layer's content digest; exit 1 (and remove the bad layers) if one differs."""
        from posttrain.sandbox.image_cli import verify_image

        ok, msg = verify_image(digest)
        typer.echo(msg)
        raise typer.Exit(0 if ok else 1)

    @image.command("gc")
    def image_gc(keep: Optional[List[str]] = typer.Option(None, "--keep", help="keep only these image digests (default: keep every image)")) -> None:
        """Remove half-built leftovers, images not kept, and layers no image uses."""
        from posttrain.sandbox.rootfs_store import gc

        typer.echo(gc(set(keep) if keep else None))
