"""The `posttrain` command. Each module in this package registers one command group.

Every command is a thin call into the library. Heavy imports (torch, transformers)
happen inside the command functions, so `posttrain --help` answers in well under a
second. User errors (`PosttrainError`) print as one line on stderr, exit code 2.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

# The command draws its own progress; Hugging Face's bars ("Writing model shards", downloads)
# would interleave with it. Set before transformers is first imported; a user's own setting wins.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
# oneDNN (torch's bf16 matmuls and attention on a CPU with AMX) keeps a compiled primitive for each matrix
# shape it met, 1,024 by default. An RL update's token counts change every step, so its shapes rarely
# repeat and the cache only grows: with bf16 rollouts and update on SmolLM2 the heap in use rose ~16 MB a step
# (~0.5 GiB by step 30). 64 halved that, generation within noise (docs/benchmarks.md, "The memory
# defaults"). Read by oneDNN at its first primitive, so set before any; a user's own setting wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")

from typing import Any

import typer

from posttrain.errors import PosttrainError

app = typer.Typer(
    name="posttrain",
    help="Post-train language models on verifiable tasks: SFT, DPO, RL, sandboxes, evaluation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_commands() -> None:
    import posttrain.cli as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name in ("main", "common") or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"posttrain.cli.{info.name}")
        register = getattr(mod, "register", None)
        if register is not None:
            register(app)


_register_commands()


def _one_line_notes() -> None:
    """A config key in an older shape is one line on stderr (`posttrain: note: ...`), not Python's
    two-line warning with a source line; other warnings keep their format."""
    import warnings

    from posttrain.config import ConfigDeprecationWarning

    default = warnings.formatwarning

    def fmt(message: Any, category: Any, filename: str, lineno: int, line: str | None = None) -> str:
        if issubclass(category, ConfigDeprecationWarning):
            return f"posttrain: note: {message}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = fmt


def resumed_run_config(argv: list[str]) -> Any:
    """`--resume RUN` (or `--resume=RUN`): RUN's config file, whose trainer.world_size the launcher
    starts again; None without --resume."""
    from posttrain.store.run import RunDir

    for i, a in enumerate(argv):
        if a == "--resume" and i + 1 < len(argv):
            return RunDir(argv[i + 1]).config
        if a.startswith("--resume="):
            return RunDir(a.split("=", 1)[1]).config
    return None


def main() -> None:
    from posttrain.builtins import load_builtins
    from posttrain.parallel.launch import launch_local, maybe_spawn

    def launch_ray(*args: Any) -> Any:  # imported only when asked for: Ray is optional
        from posttrain.distributed.trainer_group import launch_ray_group

        return launch_ray_group(*args)

    # trainer.world_size=N: this command re-run as N ranks (no torch import before this)
    maybe_spawn(sys.argv[1:], {"local": launch_local, "ray": launch_ray}, resumed_run_config(sys.argv[1:]))
    load_builtins()  # every extension point's built-ins, once
    _one_line_notes()
    try:
        app()
    except PosttrainError as e:
        print(f"posttrain: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("posttrain: interrupted; progress so far is saved (use --resume to continue)", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
