"""Vision quickstart benchmark: the RL gain on image tasks and its two controls, in one run.

    nice -n 15 .venv/bin/python benchmarks/vision_quickstart.py [--out DIR] [dotted overrides...]

Prints the per-domain table (SFT, +RL, delta, McNemar p, blank-image control, alt-text
control before -> after RL), then the ratios that matter, all measured in the same run:
after/before RL pass@1, image/blank pass@1 after RL, and the RL gain with the image over
the RL gain with alt text alone. Writes summary.json in the run directory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path


def main() -> None:
    from posttrain.builtins import load_builtins

    load_builtins()  # as the CLI does first: load_config checks every registry name it reads
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/bench-vision")
    ap.add_argument("--config", default=None)
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()

    from posttrain.recipes.vision import format_summary, run_vision_quickstart, vision_config

    cfg = vision_config(a.config, a.overrides)
    t0 = time.perf_counter()
    s = run_vision_quickstart(cfg, Path(a.out))
    wall = time.perf_counter() - t0
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}; wall {wall:.0f}s")
    print("\n".join(format_summary(s, Path(a.out))))
    g, b, alt = s["rl_gain"], s["blank_control"], s["alt_text_control"]
    print(f"after/before RL pass@1      {g['to'] / max(g['from'], 1e-9):.2f}x  (+{100 * g['delta']:.1f} points, p={g['p_value']:.2g})")
    print(f"image/blank pass@1 after RL {b['to'] / max(b['from'], 1e-9):.2f}x  (p={b['p_value']:.2g})")
    print(f"RL gain image / alt-text    {g['delta']:+.3f} / {alt['delta']:+.3f}")
    print(f"phases (s): {json.dumps({k: round(v) for k, v in s['phase_s'].items()})}")


if __name__ == "__main__":
    main()
