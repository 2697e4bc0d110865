"""The comparison report: a Markdown summary for the terminal and a self-contained HTML.

    md = comparison_markdown(cmp)
    path = write_report(cmp, "runs/eval-new/report.html")

The HTML embeds every figure as a base64 PNG and every flipped sample's completions, so
it can be mailed or attached to a CI job without the run directories.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from posttrain.eval import plots
from posttrain.eval.compare import Comparison, DomainResult
from posttrain.eval.stats import fmt_p
from posttrain.store.run import RunDir


def _f(x: float, digits: int = 3) -> str:
    return "nan" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _row(d: DomainResult) -> list[str]:
    ci = f"[{_f(d.diff.low)}, {_f(d.diff.high)}]"
    steps = f"{_f(d.steps.estimate, 2)} [{_f(d.steps.low, 2)}, {_f(d.steps.high, 2)}]" if d.steps else "-"
    tokens = f"{_f(d.tokens.estimate, 1)} [{_f(d.tokens.low, 1)}, {_f(d.tokens.high, 1)}]" if d.tokens else "-"
    flips = sum(f.direction == "pass->fail" for f in d.flips), sum(f.direction == "fail->pass" for f in d.flips)
    of = "pass" if d.method == "mcnemar" else "score"
    return [d.domain, str(d.tasks), str(d.pairs), _f(d.pass_before), _f(d.pass_after),
            _signed(d.pass_after - d.pass_before), _f(d.score_before), _f(d.score_after),
            _signed(d.score_after - d.score_before), f"Δ{of} {ci}", f"{fmt_p(d.p_value)} / {fmt_p(d.p_holm)}",
            steps, tokens, f"{flips[0]} / {flips[1]}", d.verdict]


def _signed(x: float) -> str:
    return "nan" if x is None or math.isnan(x) else f"{x:+.3f}"


HEADER = ["domain", "tasks", "pairs", "pass A", "pass B", "Δpass", "score A", "score B", "Δscore", "95% CI",
          "p / Holm", "Δsteps [CI]", "Δtokens [CI]", "P→F / F→P", "verdict"]


# What a terminal shows (fits 80 columns); report.html and --json keep every column of HEADER
COMPACT_HEADER = ["domain", "pairs", "pass A→B", "Δ [95% CI]", "p (Holm)", "verdict"]


def compact_row(d: DomainResult) -> list[str]:
    before, after = (d.pass_before, d.pass_after) if d.method == "mcnemar" else (d.score_before, d.score_after)
    return [d.domain, str(d.pairs), f"{_f(before)}→{_f(after)}",
            f"{_signed(d.diff.estimate)} [{_signed(d.diff.low)}, {_signed(d.diff.high)}]", fmt_p(d.p_holm), d.verdict]


def comparison_markdown(cmp: Comparison, report_path: str | None = None, max_flips: int = 20,
                        table: bool = True) -> str:
    """The comparison as Markdown; `table=False` leaves out the wide table (the terminal prints
    COMPACT_HEADER's columns instead) and points to the report for it."""
    lines = [f"## Comparison: `{cmp.run_a}` (A, before) → `{cmp.run_b}` (B, after)", ""]
    if table:
        lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        lines += ["| " + " | ".join(_row(d)) + " |" for d in cmp.domains + [cmp.overall]]
    else:
        lines.append("Pass rates (mean scores for graded domains); steps, tokens and flips per domain: the report.")
    lines += [f"- **warning**: {w}" for w in cmp.warnings]
    lines += ["", f"Unpaired samples: {cmp.only_a} only in A, {cmp.only_b} only in B; "
              f"{cmp.infra_dropped} pairs dropped for infra errors (never counted as failures)."]
    flips = [f for d in cmp.domains for f in d.flips]
    if flips:
        lines += ["", f"### Flips ({len(flips)})", ""]
        for f in flips[:max_flips]:
            lines.append(f"- **{f.direction}** `{f.task_id}` epoch {f.epoch} ({f.domain}): "
                         f"A `{f.link_a}`, B `{f.link_b}`")
        if len(flips) > max_flips:
            lines.append(f"- … {len(flips) - max_flips} more in the JSON / HTML report")
    label, detail = _verdict(cmp)
    lines += ["", f"**{label}**{detail}"]
    if report_path:
        lines.append(f"\nReport: {report_path}")
    return "\n".join(lines)


def _verdict(cmp: Comparison) -> tuple[str, str]:
    """(headline, the rest of its sentence): one source for the Markdown and the HTML, keyed on the gate's own verdict."""
    v = cmp.to_dict()["verdict"]
    if v == "regressed":
        return "REGRESSED", f" in {', '.join(cmp.regressions)} (the 95% interval of B - A lies below 0)"
    if v == "inconclusive":
        return "INCONCLUSIVE", (f" in {', '.join(cmp.unproven)}: the interval reaches below -{cmp.margin:g}, so a loss "
                                "larger than the margin is not ruled out (add tasks or epochs)")
    return "OK", f": no domain can have lost more than the margin {cmp.margin:g}"


def _table(rows: list[list[str]], header: list[str]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr class='{}'>".format(html.escape(r[-1])) + "".join(f"<td>{html.escape(c)}</td>" for c in r)
                   + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _training_metrics(cmp: Comparison) -> dict[str, list[dict[str, Any]]]:
    """metrics.jsonl of each run, or of the training run its model came from."""
    out = {}
    for label, run, meta in (("A", cmp.run_a, cmp.meta_a), ("B", cmp.run_b, cmp.meta_b)):
        for cand in (Path(run), Path(meta["source_run"]) if meta.get("source_run") else None):
            if cand is not None and RunDir(cand).metrics.is_file():
                out[label] = plots.read_metrics(RunDir(cand).metrics)
                break
    return out


def _figures(cmp: Comparison) -> list[tuple[str, str]]:
    rows = cmp.domains + [cmp.overall]
    figs = [("Per-domain difference (forest plot)",
             plots.forest_plot([(d.domain, d.diff.estimate, d.diff.low, d.diff.high, d.verdict) for d in rows],
                               cmp.margin)),
            ("Pass rates before and after",
             plots.pass_rate_bars([d.domain for d in rows], [d.pass_before for d in rows],
                                  [d.pass_after for d in rows], n=[d.pairs for d in rows]))]
    steps: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    tokens: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for ra, rb in cmp.pairs:
        steps[ra.domain][0].append(ra.steps)
        steps[ra.domain][1].append(rb.steps)
        tokens[ra.domain][0].append(ra.tokens)
        tokens[ra.domain][1].append(rb.tokens)
    figs.append(("Step-count distributions", plots.count_distributions("steps", dict(steps))))
    figs.append(("Token-count distributions", plots.count_distributions("tokens", dict(tokens))))
    curves = plots.training_curves(_training_metrics(cmp))
    if curves:
        figs.append(("Training reward and pass-rate curves", curves))
    return figs


def _flip_html(cmp: Comparison) -> str:
    """Each flip with the prompt both runs answered, then the two completions side by side."""
    from posttrain.eval.records import sample_key

    prompts = {ra.key: ra.prompt for ra, _ in cmp.pairs}
    items = []
    for d in cmp.domains:
        for f in d.flips:
            prompt = prompts.get(sample_key(f.task_id, f.task_version, f.epoch), "")
            anchor = html.escape(f"{f.task_id}-{f.epoch}")
            items.append(
                f"<details id='{anchor}'><summary><b>{f.direction}</b> {html.escape(f.task_id)} "
                f"epoch {f.epoch} ({html.escape(f.domain)})</summary>"
                f"<p>A: <a href='{html.escape(f.link_a)}'>{html.escape(f.link_a)}</a><br>"
                f"B: <a href='{html.escape(f.link_b)}'>{html.escape(f.link_b)}</a></p>"
                f"<b>prompt</b><pre>{html.escape(prompt or '(not recorded)')}</pre>"
                f"<div class='pair'><div>A (before)<pre>{html.escape(f.completion_a)}</pre></div>"
                f"<div>B (after)<pre>{html.escape(f.completion_b)}</pre></div></div></details>")
    return "".join(items) or "<p>No flips.</p>"


CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}
tr.regressed{background:#fadbd8}tr.inconclusive{background:#fdebd0}tr.improved{background:#d5f5e3}
.pair{display:flex;gap:1em}.pair>div{flex:1;min-width:0}
pre{background:#f4f6f7;padding:.5em;white-space:pre-wrap;word-break:break-word}
img{max-width:100%;height:auto}"""


def write_report(cmp: Comparison, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figs = "".join(f"<h3>{html.escape(t)}</h3><img alt='{html.escape(t)}' src='data:image/png;base64,{b64}'>"
                   for t, b64 in _figures(cmp))
    label, detail = _verdict(cmp)
    warn = "".join(f"<p><b>Warning</b>: {html.escape(w)}</p>" for w in cmp.warnings)
    doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>posttrain compare</title>"
           f"<style>{CSS}</style></head><body><h1>{html.escape(cmp.run_a)} → {html.escape(cmp.run_b)}</h1>{warn}"
           f"<p>Gate: lower 95% CI bound of the paired difference below -{cmp.margin:g}. "
           f"Verdict: <b>{label}</b>{html.escape(detail)}</p>"
           + _table([_row(d) for d in cmp.domains + [cmp.overall]], HEADER)
           + f"<p>Unpaired: {cmp.only_a} only in A, {cmp.only_b} only in B; {cmp.infra_dropped} "
             f"pairs dropped for infra errors.</p>{figs}<h2>Flips</h2>{_flip_html(cmp)}</body></html>")
    out.write_text(doc, encoding="utf-8")
    return out
