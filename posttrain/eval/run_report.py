"""The self-contained report.html every recipe writes at its end.

    path = write_run_report(run_dir)       # run_dir/report.html, figures inline as base64 PNG

Sections, each only when the run has its data:
- before/after table of held-out pass@1 with 95% Wilson intervals and exact McNemar
  p-values (eval_before.json / eval_after.json), and the same as labelled bars;
- curves: training reward per domain (from the trajectory store, EMA-smoothed, 95% band),
  held-out pass@1, KL and entropy, step time by phase, infra-error and dropped-group
  rates, SFT / DPO losses; a panel appears only when it has data, and once;
- the scheduler's page (scheduler.png) when it was written;
- flips, each with its prompt and both completions;
- the reward-hacking detectors' findings; the run's warnings.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from posttrain.eval.recipe_eval import quickstart_eval
from posttrain.eval.stats import fmt_p
from posttrain.store.run import SUMMARY, RunDir

SMOOTH = 0.6
# (title, y label, predicate over metric keys); evaluated in order, empty panels dropped
PANELS: list[tuple[str, str, Callable[[str], bool]]] = [
    ("held-out pass@1 per domain", "pass@1", lambda k: k.startswith("eval/pass@1/")),
    ("KL and entropy", "nats", lambda k: k.startswith(("train/kl", "train/entropy"))),
    ("step time by phase", "seconds", lambda k: k.startswith("time/") and k.endswith("_s")),
    ("memory per step", "GiB", lambda k: k.startswith("mem/") and k.endswith("_gib")),
    ("infra-error and dropped-group rates", "fraction",
     lambda k: k in ("infra_error_frac", "groups/dropped_frac", "format_fail_frac")),
    ("staleness and logprob mismatch", "", lambda k: "staleness" in k or k.endswith("logprob_mismatch")),
    ("loss", "loss", lambda k: k in ("loss", "eval/loss", "train/loss")),
    ("DPO preference accuracy and reward margin", "", lambda k: k in ("accuracy", "margin", "eval/accuracy", "eval/margin")),
    ("reward-hacking detector scores", "score", lambda k: k.startswith("detect/") and k.endswith("/score")),
]


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    from posttrain.eval.plots import read_metrics

    p = RunDir(run_dir).metrics
    return read_metrics(p) if p.is_file() else []


def _prompts(run_dir: Path) -> dict[str, str]:
    from posttrain.eval.run_data import pinned_prompts  # the same reader the viewer uses

    return pinned_prompts(run_dir)


def curves_png(rows: Sequence[dict[str, Any]], rewards: dict[str, dict[str, list[float]]]) -> str | None:
    """One figure of every non-empty panel, three to a row; None when there is nothing to draw."""
    from posttrain.eval.plots import _png
    from posttrain.store.metric_pages import ema, panel_grid, series

    draws: list[tuple[str, str, Callable[[Any], None]]] = []
    if rewards:
        def reward(ax: Any) -> None:
            for dom in sorted(rewards):
                c = rewards[dom]
                line, = ax.plot(c["step"], ema(c["mean"], SMOOTH), lw=1.4, label=dom)
                ax.fill_between(c["step"], ema(c["low"], SMOOTH), ema(c["high"], SMOOTH), alpha=0.15,
                                color=line.get_color())
                ax.plot(c["step"], c["mean"], lw=0.6, alpha=0.25, color=line.get_color())
        draws.append((f"training reward per domain (EMA {SMOOTH}, 95% band)", "mean reward", reward))
    keys = sorted({k for r in rows for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    for title, ylabel, pred in PANELS:
        mine = [k for k in keys if pred(k)]
        if not mine:
            continue

        def draw(ax: Any, mine: list[str] = mine) -> None:
            for k in mine:
                xs, ys = series(rows, k)
                if k.startswith("eval/"):
                    ax.plot(xs, ys, marker="o", ms=3, lw=1.2, label=k)
                else:
                    line, = ax.plot(xs, ema(ys, SMOOTH), lw=1.3, label=k)
                    ax.plot(xs, ys, lw=0.6, alpha=0.25, color=line.get_color())
        smooth_note = "" if title.startswith("held-out") else f" (EMA {SMOOTH})"
        if title == "KL and entropy":  # name only what the run logged (no KL without a reference model)
            title = " and ".join(n for n, p in (("KL", "train/kl"), ("entropy", "train/entropy"))
                                 if any(k.startswith(p) for k in mine))
        draws.append((title + smooth_note, ylabel, draw))
    if not draws:
        return None
    plt, fig, axes = panel_grid(len(draws), cols=3)
    for ax, (title, ylabel, draw) in zip(axes, draws):
        draw(ax)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_xlabel("step", fontsize=8)
        ax.legend(fontsize=6)
    fig.tight_layout()
    return _png(fig)


def _f(x: Any, d: int = 3) -> str:
    return "–" if x is None or x != x else f"{x:.{d}f}"


def _table(e: dict[str, Any]) -> str:
    head = ("<tr><th>domain</th><th>tasks</th><th>before RL [95% CI]</th><th>after RL [95% CI]</th><th>Δ</th>"
            "<th>P→F / F→P</th><th>McNemar p</th></tr>")
    body = "".join(
        f"<tr><td>{html.escape(r['domain'])}</td><td>{r['n']}</td>"
        f"<td>{_f(r['before'])} [{_f(r['before_ci'][0])}, {_f(r['before_ci'][1])}]</td>"
        f"<td>{_f(r['after'])} [{_f(r['after_ci'][0])}, {_f(r['after_ci'][1])}]</td>"
        f"<td>{r['after'] - r['before']:+.3f}</td><td>{r['pass_to_fail']} / {r['fail_to_pass']}</td>"
        f"<td>{fmt_p(r['p_value'])}</td></tr>" for r in e["rows"])
    return f"<table>{head}{body}</table>"


def _flips(flips: list[dict[str, Any]], limit: int = 50) -> str:
    if not flips:
        return "<p>No flips.</p>"
    items = [f"<details><summary><b>{html.escape(f['direction'])}</b> {html.escape(f['task_id'])} "
             f"({html.escape(f['domain'])})</summary><b>prompt</b><pre>{html.escape(f['prompt'] or '(not pinned)')}</pre>"
             f"<div class='pair'><div>before<pre>{html.escape(f['completion_a'] or '(not recorded)')}</pre></div>"
             f"<div>after<pre>{html.escape(f['completion_b'] or '(not recorded)')}</pre></div></div></details>"
             for f in flips[:limit]]
    more = f"<p>… {len(flips) - limit} more flips: see `posttrain view`.</p>" if len(flips) > limit else ""
    return "".join(items) + more


def _findings(findings: list[Any]) -> str:
    rows = "".join(f"<tr class='{'alarm' if f.alarm else ''}'><td>{html.escape(f.detector)}</td>"
                   f"<td>{'ALARM' if f.alarm else 'ok' if f.enough_data else 'not enough data'}</td>"
                   f"<td>{_f(f.score)} / {_f(f.threshold)}</td><td>{html.escape(f.message)}</td></tr>" for f in findings)
    return f"<table><tr><th>detector</th><th>finding</th><th>score / threshold</th><th>detail</th></tr>{rows}</table>"


CSS = """body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}tr.alarm{background:#fadbd8}
img{max-width:100%;height:auto}pre{background:#f4f6f7;padding:.5em;white-space:pre-wrap;word-break:break-word}
.pair{display:flex;gap:1em}.pair>div{flex:1;min-width:0}"""


def write_run_report(run_dir: str | Path, title: str | None = None) -> Path:
    from posttrain.eval import plots
    from posttrain.eval.detectors import run_detectors
    from posttrain.eval.run_data import reward_by_step

    d = Path(run_dir)
    run, rows = RunDir(d), _metrics(d)
    with run.queries() as q:
        rewards = reward_by_step(q) if q is not None else {}
        findings = run_detectors(rows, q) if q is not None else []
    prompts = _prompts(d)
    table = quickstart_eval(d, lambda t: prompts.get(t, ""))
    parts = [f"<h1>{html.escape(title or d.name)}</h1><p>{html.escape(str(d.resolve()))}</p>"]
    summary = run.read_summary() or {}
    if table:
        r = table["rows"]
        bars = plots.pass_rate_bars([x["domain"] for x in r], [x["before"] for x in r], [x["after"] for x in r],
                                    n=[x["n"] for x in r], names=("before RL", "after RL"))
        parts += ["<h2>Held-out pass@1, before and after</h2>", _table(table),
                  f"<img alt='held-out pass@1 before and after' src='data:image/png;base64,{bars}'>"]
    curves = curves_png(rows, rewards)
    if curves:
        parts += ["<h2>Curves</h2>", f"<img alt='training curves' src='data:image/png;base64,{curves}'>"]
    if any(k.startswith("sched/") for r in rows for k in r):
        from posttrain.schedule.plots import plot_scheduler

        plot_scheduler(d, rows)  # redrawn from the rows: only the panels that teach something
    if run.scheduler_page.is_file():
        b64 = base64.b64encode(run.scheduler_page.read_bytes()).decode()
        parts += ["<h2>Scheduler</h2>", f"<img alt='scheduler' src='data:image/png;base64,{b64}'>"]
    if table:
        parts += [f"<h2>Flips ({len(table['flips'])})</h2>", _flips(table["flips"])]
    if findings:
        parts += ["<h2>Reward-hacking detectors</h2>", _findings(findings)]
    warnings = summary.get("warnings") or {}
    if warnings:
        parts += ["<h2>Warnings</h2><ul>" + "".join(f"<li>{html.escape(str(w))}</li>" for w in warnings.values())
                  + "</ul>"]
    if summary:
        parts += [f"<h2>{SUMMARY}</h2>", f"<pre>{html.escape(json.dumps(summary, indent=1, default=str))}</pre>"]
    out = run.report
    out.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title or d.name)}</title>"
                   f"<style>{CSS}</style></head><body>{''.join(parts)}</body></html>", encoding="utf-8")
    return out
