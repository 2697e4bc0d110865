"""Why two evaluations of the same models can disagree: they sampled differently.

    warnings = sampling_warnings(cmp)   # lines for `posttrain compare`, empty when all agree

Each side's settings are its meta.json `sampling` and the number of epochs in its records.
A side whose model came from a training run (meta `source_run`) is also checked against the
held-out evaluation that run printed (its summary.json `eval`: greedy, one sample per task
by default): an `eval` with the suite's defaults (T = 0.7, 2 epochs) measures something
else, and says so with the flags that reproduce the run.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from posttrain.eval.records import SampleRecord
from posttrain.store.run import RunDir


def _settings(meta: dict[str, Any], records: Iterable[SampleRecord]) -> dict[str, Any]:
    sp = meta.get("sampling") or {}
    return {"temperature": float(sp.get("temperature", 0.0)), "max_new_tokens": sp.get("max_new_tokens"),
            "epochs": 1 + max((r.epoch for r in records), default=0)}


def describe(s: dict[str, Any]) -> str:
    how = "greedy" if s["temperature"] == 0 else f"T={s['temperature']:g}"
    budget = f", budget {s['max_new_tokens']}" if s.get("max_new_tokens") is not None else ""
    return f"{how}, {s['epochs']} epoch{'s' if s['epochs'] != 1 else ''}{budget}"


def _training_eval(source_run: str | None) -> dict[str, Any] | None:
    """The held-out evaluation settings of the training run a model came from, if it recorded them."""
    if not source_run:
        return None
    p = RunDir(source_run).summary
    try:
        ev = json.loads(p.read_text()).get("eval") if p.is_file() else None
    except (OSError, ValueError):
        return None
    if not isinstance(ev, dict) or "temperature" not in ev:
        return None
    return {"temperature": float(ev["temperature"] or 0.0), "epochs": int(ev.get("samples_per_task", 1)),
            "max_new_tokens": None}


def sampling_warnings(meta_a: dict[str, Any], recs_a: list[SampleRecord], meta_b: dict[str, Any],
                      recs_b: list[SampleRecord]) -> list[str]:
    a, b = _settings(meta_a, recs_a), _settings(meta_b, recs_b)
    out = []
    if a != b:
        out.append(f"A and B were sampled differently (A: {describe(a)}; B: {describe(b)}): "
                   "a difference may come from the settings, not the models")
    for label, meta, s in (("A", meta_a, a), ("B", meta_b, b)):
        ev = _training_eval(meta.get("source_run"))
        if ev and (ev["temperature"], ev["epochs"]) != (s["temperature"], s["epochs"]):
            out.append(f"{label} was sampled {describe(s)}, but the run that produced its model "
                       f"({meta['source_run']}) evaluated {describe(ev)}; to reproduce that run's numbers pass "
                       f"`posttrain eval --temperature {ev['temperature']:g} --epochs {ev['epochs']}`")
    return out
