"""How fast the real CLI refuses bad input: each case of issue 23's list, from process start to exit.

    .venv/bin/python benchmarks/cli_bad_input.py [--repeats 3]

Target: a one-line error (no traceback) within 5 s of the command's start, before any model
work. Prints a table with the median wall time per case, the exit code and the error line.
The correctness of each case (one line, names the input, writes nothing) is tested in
tests/integration/test_cli_bad_input.py; this script only times them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "posttrain.cli.main"]


def cases(tmp: Path) -> list[tuple[str, list[str]]]:
    model = tmp / "mixtral"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "mixtral"}))
    busy = tmp / "busy"
    busy.mkdir(exist_ok=True)
    (busy / "config.yaml").write_text("name: earlier\n")
    ex = "examples/tiny_rl.yaml"
    return [
        ("rl.loss=ppo", ["rl", ex, "rl.loss=ppo"]),
        ("rl.steps=-3", ["rl", ex, "rl.steps=-3"]),
        ("unknown key", ["rl", ex, "rl.stepz=3"]),
        ("unknown engine", ["rl", ex, "engine.name=nope"]),
        ("unknown domain", ["rl", ex, "tasks.domains={nosuch: {}}"]),
        ("missing plugin", ["rl", ex, "--plugin", "no_such_plugin.py"]),
        ("model/engine pair", ["rl", ex, f"model.path={model}", "engine.name=fast"]),
        ("non-empty --out", ["rl", ex, "--out", str(busy)]),
        ("sft.lr=-1", ["sft", ex, "sft.lr=-1"]),
        ("dpo.loss=hinge", ["dpo", ex, "dpo.loss=hinge"]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print("| case | median s | max s | exit | one line | error |")
        print("|---|---:|---:|---:|---|---|")
        worst = 0.0
        for name, argv in cases(tmp):
            out = [] if "--out" in argv else ["--out", str(tmp / "run")]
            times, r = [], None
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                r = subprocess.run(CLI + argv + out, cwd=ROOT, capture_output=True, text=True, timeout=120)
                times.append(time.perf_counter() - t0)
            lines = r.stderr.strip().splitlines()
            worst = max(worst, max(times))
            print(f"| {name} | {statistics.median(times):.2f} | {max(times):.2f} | {r.returncode} | "
                  f"{len(lines) == 1 and 'Traceback' not in r.stderr} | {lines[-1][:90] if lines else ''} |")
        print(f"\nslowest case: {worst:.2f} s (target <= 5 s): {'PASS' if worst <= 5 else 'MISS'}")


if __name__ == "__main__":
    main()
