"""Every built-in evaluation suite, run once through the real CLI: does each domain evaluate?

    .venv/bin/python benchmarks/eval_suites.py [--model runs/quickstart] [--vision-model DIR]

Text suites run on `--model` (default: a fresh tiny model with an 8192-token context, so
the long-context suites fit); image suites (chart, drawing,
ui) on `--vision-model` (default: a fresh tiny LLaVA). Each row is one cold run
(`--no-cache`): samples, pass@1, mean steps and tokens per sample, the infra-error rate
(reported apart, never a failure) with its most common message, and wall time. Untrained
tiny models score near zero; the point is that every domain, multi-step ones included,
runs end to end with the right accounting. A model whose context cannot hold a prompt
(the quickstart's 256 tokens against needle's 7000) gets engine errors that say so.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "posttrain.cli.main"]
VISION = {"chart", "drawing", "ui"}


def build_models(d: Path, context: int) -> tuple[Path, Path]:
    from posttrain.config import TinyModelConfig
    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny
    from posttrain.models.vlm import build_tiny_vlm, save_vlm

    text = save_policy(*build_tiny(TinyModelConfig(max_position_embeddings=context)), d / "tiny")
    return text, save_vlm(*build_tiny_vlm(), d / "tiny-vlm")


def run_suite(suite: str, model: Path, out: Path) -> dict:
    cmd = CLI + ["eval", "--model", str(model), "--suite", suite, "--out", str(out), "--json", "--no-cache"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"eval of {suite} failed: {res.stderr[-2000:]}")
    o = json.loads(res.stdout.strip().splitlines()[-1])["summary"]["overall"]
    errors, reasons = collections.Counter(), collections.Counter()
    for line in (out / "samples.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["status"] == "infra_error":
            errors[(r["error"] or {}).get("message", r["reason"])[:60]] += 1
        elif not r["passed"]:
            reasons[(r["reason"] or "")[:40]] += 1
    # --json writes NaN (nothing judged) as null
    rates = {k: float("nan") if o[k] is None else o[k] for k in ("pass@1", "steps", "tokens")}
    ci = o["pass_rate"]
    return {"suite": suite, "samples": o["samples"], **rates, "ci95": (ci["low"], ci["high"]), "infra": o["infra_rate"],
            "why": errors.most_common(1)[0][0] if errors else "", "wall_s": wall,
            "fails": ", ".join(f"{k} {v}" for k, v in reasons.most_common(3))}


def main() -> None:
    from posttrain.eval.suite import builtin_suites

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--vision-model", type=Path, default=None)
    ap.add_argument("--context", type=int, default=8192, help="context of the fresh tiny text model")
    ap.add_argument("--suites", nargs="+", default=None, help="these suites only (default: every built-in one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        tiny, vlm = build_models(d, args.context)
        text, vision = args.model or tiny, args.vision_model or vlm
        print(f"text model {text}, vision model {vision}")
        print(f"{'suite':12} {'samples':>7} {'pass@1':>7} {'95% CI':>15} {'steps':>6} {'tokens':>7} {'infra':>6} "
              f"{'wall s':>7}  infra reason | commonest failures")
        for name in args.suites or builtin_suites():
            r = run_suite(name, vision if name in VISION else text, d / f"eval-{name}")
            lo, hi = r["ci95"]
            print(f"{r['suite']:12} {r['samples']:7d} {r['pass@1']:7.3f} {f'[{lo:.3f}, {hi:.3f}]':>15} {r['steps']:6.2f} "
                  f"{r['tokens']:7.1f} {r['infra']:6.1%} {r['wall_s']:7.1f}  {r['why']} | {r['fails']}", flush=True)


if __name__ == "__main__":
    main()
