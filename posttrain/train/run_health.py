"""Warnings about an RL run that is not learning, from its metrics rows.

    for kind, text in learning_warnings(history).items(): print(text)

`examples/tiny_rl.yaml` once trained nothing and said nothing: SFT reached 0.000, 91% of
the groups had zero reward variance and were dropped, and no gradient step ran. These
checks name that outcome as it happens. They read only the metrics rows `rl.learn`
already writes (`groups/dropped_frac`, `train/loss`), so they cost nothing.
"""

from __future__ import annotations

from typing import Sequence

DROPPED_LIMIT = 0.9  # mean share of dropped groups above which a run is warned about
WINDOW = 10  # steps a check looks back over


def learning_warnings(history: Sequence[dict[str, float]], window: int = WINDOW) -> dict[str, str]:
    """{kind: text} about the last `window` steps (fewer at the start of a run: all of them)."""
    recent = list(history[-window:])
    out: dict[str, str] = {}
    if not recent:
        return out
    dropped = sum(r.get("groups/dropped_frac", 0.0) for r in recent) / len(recent)
    if dropped > DROPPED_LIMIT:
        out["dropped_groups"] = (f"{dropped:.0%} of the groups of the last {len(recent)} RL steps were dropped (every sample of a "
                   "prompt scored the same, so there is no learning signal): the tasks are too hard or too easy for the "
                   "model; check the SFT warm-up's pass rate, tasks.domains.*.difficulty or rl.group_size")
    if not any("train/loss" in r for r in recent):
        out["no_update"] = (f"no gradient step ran in the last {len(recent)} RL steps: every group was dropped or every sample "
                   "was an infrastructure error")
    return out
