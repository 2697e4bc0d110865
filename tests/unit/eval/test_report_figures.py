"""Report figures that teach: values and intervals on bars, no panel off the page, flips with
prompts, and a run report whose sections appear only with their data."""

from __future__ import annotations

import base64
import math
import struct

from posttrain.eval import plots


def _png_width(b64: str) -> int:
    raw = base64.b64decode(b64)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">I", raw[16:20])[0]


def test_bars_print_every_value_and_draw_intervals():
    plt = plots._pyplot()
    fig, ax = plt.subplots()
    plots.draw_pass_bars(ax, ["a", "b"], [0.25, 0.5], [0.75, math.nan], n=[20, 20])
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == ["0.25", "0.50", "0.75"]  # the missing after-value prints nothing
    bars = [c for c in ax.containers if type(c).__name__ == "BarContainer"]
    assert len(bars) == 2 and all(c.errorbar is not None for c in bars)
    plt.close(fig)


def test_training_curves_wrap_instead_of_running_off_the_page():
    rows = [{"step": s, "reward/a": s / 10, "reward/b": 0.1, "reward/c": 0.2, "pass/d": 0.3} for s in range(5)]
    four = _png_width(plots.training_curves({"A": rows}))
    one = _png_width(plots.training_curves({"A": [{"step": s, "reward/a": s} for s in range(5)]}))
    assert four <= 3 * one + 10  # three panels to a row at most


def test_step_memory_has_its_own_panel():
    from posttrain.eval.run_report import PANELS

    assert [title for title, _, pred in PANELS if pred("mem/peak_gib") and pred("mem/rss_gib")] == ["memory per step"]


def test_compare_report_flips_carry_their_prompts(make_run, planted):
    from posttrain.eval.compare import compare_runs
    from posttrain.eval.report import write_report

    a, b = make_run("a", planted(None)), make_run("b", planted("code"))
    html = write_report(compare_runs(a, b), b / "report.html").read_text()
    assert "<b>prompt</b><pre>prompt code-1</pre>" in html


def test_run_report_of_a_synthetic_run_has_each_section_once(tmp_path):
    from posttrain.eval.run_report import write_run_report
    from posttrain.testing.synthetic_runs import write_run

    d = write_run(tmp_path / "run", steps=12, groups=4, group_size=4, seed=2)
    html = write_run_report(d).read_text()
    for heading in ("Held-out pass@1, before and after", "Curves", "Flips", "Reward-hacking detectors"):
        assert html.count(f"<h2>{heading}") == 1
    assert "<b>prompt</b><pre>[user]" in html
    assert "src='http" not in html


def test_run_report_without_evals_or_store_still_draws_its_losses(tmp_path):
    import json

    from posttrain.eval.run_report import write_run_report

    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 1 / (s + 1)}) + "\n" for s in range(5)))
    html = write_run_report(tmp_path).read_text()
    assert "<h2>Curves" in html and "<h2>Held-out" not in html and "<h2>Flips" not in html
