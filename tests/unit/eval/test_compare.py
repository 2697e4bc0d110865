"""Paired comparison and the regression gate on synthetic runs with a planted regression."""

from __future__ import annotations

import json

import pytest
from posttrain.eval.compare import compare_runs
from posttrain.eval.records import EvalError


def test_gate_catches_planted_regression_only(make_run, planted):
    a = make_run("a", planted(None))
    b = make_run("b", planted("code"))
    cmp = compare_runs(a, b, margin=0.02)
    verdicts = {d.domain: d.verdict for d in cmp.domains}
    assert verdicts == {"arithmetic": "unchanged", "code": "regressed", "json": "unchanged"}


def test_gate_tolerates_symmetric_noise_within_margin(make_run, planted):
    base = planted(None, tasks=40)
    noisy = dict(base)
    for d in ("arithmetic", "json"):  # one flip each way per unchanged domain
        for tid, e in ((f"{d}-1", 1), (f"{d}-5", 0)):
            row = list(noisy[(d, tid)])
            row[e] = (not row[e][0], row[e][1])
            noisy[(d, tid)] = row
    noisy.update({k: v for k, v in planted("code", tasks=40).items() if k[0] == "code"})
    cmp = compare_runs(make_run("a", base), make_run("b", noisy), margin=0.05)
    assert cmp.regressions == ["code", "ALL"]


def test_regressed_domain_is_significant_after_holm(make_run, planted):
    cmp = compare_runs(make_run("a", planted(None)), make_run("b", planted("code")))
    code = next(d for d in cmp.domains if d.domain == "code")
    assert code.method == "mcnemar" and code.p_holm < 0.001
    assert code.steps.estimate == pytest.approx(2.0) and code.steps.low == pytest.approx(2.0)


def test_flips_link_into_both_runs(make_run, planted):
    a, b = make_run("a", planted(None)), make_run("b", planted("code"))
    code = next(d for d in compare_runs(a, b).domains if d.domain == "code")
    f = code.flips[0]
    assert f.direction == "pass->fail"
    assert f.link_a.startswith(str(a)) and f.link_b.startswith(str(b)) and f.task_id in f.link_b


def test_mismatched_versions_are_refused_and_listed(make_run, planted):
    out = planted(None, tasks=3)
    a = make_run("a", out)
    b = make_run("b", out, versions={"code-1": "v2", "json-2": "v9"})
    with pytest.raises(EvalError, match=r"code-1: v1 vs v2; json-2: v1 vs v9"):
        compare_runs(a, b)


def test_infra_errors_drop_pairs_not_count_as_failures(make_run, planted):
    out = planted(None, tasks=4)
    cmp = compare_runs(make_run("a", out), make_run("b", out, infra={("code-0", 0), ("code-1", 2)}))
    assert cmp.infra_dropped == 2 and cmp.regressions == []


def test_graded_scores_use_bootstrap(make_run, planted, tmp_path):
    from posttrain.eval.records import RecordFile, SampleRecord

    for name, shift in (("a", 0.0), ("b", 0.3)):
        recs = [SampleRecord(f"t{i}", "v1", "extract", e, e, "p", "c", min(1.0, 0.3 + 0.05 * i % 0.4 + shift),
                             False, "ok") for i in range(10) for e in range(3)]
        RecordFile(tmp_path / name / "samples.jsonl").append(recs)
    d = compare_runs(tmp_path / "a", tmp_path / "b").domains[0]
    assert d.method == "bootstrap" and d.diff.low > 0.2 and d.verdict == "improved"


def test_positive_but_uncertain_difference_is_inconclusive_not_regressed(make_run, planted):
    base = planted(None, tasks=6)
    better = dict(base)
    for tid, e in (("code-1", 0), ("code-2", 1), ("code-3", 0)):  # three fail->pass, one pass->fail
        row = list(better[("code", tid)])
        row[e] = (not row[e][0], row[e][1])
        better[("code", tid)] = row
    d = next(d for d in compare_runs(make_run("a", base), make_run("b", better)).domains if d.domain == "code")
    assert d.diff.estimate != 0 and d.diff.low < -0.02 < d.diff.high and d.verdict == "inconclusive"


def test_cli_json_and_fail_on_regression_exit_code(make_run, planted, cli):
    a, b = make_run("a", planted(None)), make_run("b", planted("code"))
    res = cli("compare", a, b, "--json", "--fail-on-regression")
    assert res.exit_code == 1
    obj = json.loads(res.stdout)
    assert obj["regressions"] == ["code", "ALL"]
    assert set(obj["domains"]["code"]) >= {"diff", "ci", "p_value", "flips", "verdict"}


def test_cli_passes_gate_without_regression(make_run, planted, cli):
    a, b = make_run("a", planted(None)), make_run("b", planted(None))
    res = cli("compare", a, b, "--fail-on-regression")
    assert res.exit_code == 0 and "OK" in res.stdout


def test_report_is_self_contained_with_plots(make_run, planted):
    meta = {"source_run": None}
    a = make_run("a", planted(None), meta=meta)
    b = make_run("b", planted("code"), meta=meta)
    (b / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward/mean": s / 10}) + "\n" for s in range(5)))
    from posttrain.eval.report import write_report

    html = write_report(compare_runs(a, b), b / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5  # forest, pass rates, steps, tokens, curves
    assert "src='http" not in html and "href='http" not in html


def test_html_headline_says_inconclusive_like_the_markdown(make_run, planted):
    from posttrain.eval.report import comparison_markdown, write_report

    base = planted(None, tasks=6)
    better = dict(base)
    for tid, e in (("code-1", 0), ("code-2", 1), ("code-3", 0)):  # the uncertain gain of the test above
        row = list(better[("code", tid)])
        row[e] = (not row[e][0], row[e][1])
        better[("code", tid)] = row
    b = make_run("b", better)
    cmp = compare_runs(make_run("a", base), b)
    assert cmp.to_dict()["verdict"] == "inconclusive" and "**INCONCLUSIVE**" in comparison_markdown(cmp)
    assert "Verdict: <b>INCONCLUSIVE</b>" in write_report(cmp, b / "report.html").read_text()
