"""benchmarks/hundred_domains.py's pooled tests from rows alone: a row carries its verdicts, so `--merge` works
after the run dirs (not in git) are gone."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from benchmarks.hundred_domains import compare_arms, stored_verdicts, transfer  # noqa: E402

HELD_OUT = {"domains": ["rg-h"], "n_tasks": 2, "before": 0.0, "after": 0.5}


def _eval(run: Path, when: str, passed: dict[str, bool]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    dom = {t: t.split("/")[0] for t in passed}
    (run / f"eval_{when}.json").write_text(json.dumps({"passed": passed, "domain_of": dom, "infra_errors": 0}))


def _row(tmp_path: Path, arm: str, seed: int, before: dict, after: dict) -> dict:
    run = tmp_path / f"{arm}-seed{seed}"
    _eval(run, "before", before), _eval(run, "after", after)
    return {"arm": arm, "seed": seed, "run_dir": str(run), "verdicts": stored_verdicts(run),
            "trained": {"domains": ["rg-a"], "delta": 0.5, "p_value": 0.5}, "held_out": HELD_OUT,
            "domain_p_values": {"rg-a": 0.5}, "domain_delta": {"rg-a": 0.5}, "zero_variance_frac": 0.5,
            "trained_groups_mean": 8, "prompts_per_step": 8, "refill_extra_rollouts": 0}


def _pair(tmp_path: Path, seed: int) -> list[dict]:
    before = {"rg-a/1": False, "rg-a/2": False, "rg-a/3": False, "rg-h/1": False, "rg-h/2": False}
    cur = {"rg-a/1": True, "rg-a/2": True, "rg-a/3": False, "rg-h/1": True, "rg-h/2": False}
    uni = {"rg-a/1": False, "rg-a/2": True, "rg-a/3": True, "rg-h/1": False, "rg-h/2": False}
    return [_row(tmp_path, "curriculum", seed, before, cur), _row(tmp_path, "uniform", seed, before, uni)]


def test_a_row_stores_each_tasks_before_and_after_by_domain(tmp_path):
    row = _pair(tmp_path, 0)[0]
    assert row["verdicts"] == {"rg-a": {"rg-a/1": "01", "rg-a/2": "01", "rg-a/3": "00"},
                               "rg-h": {"rg-h/1": "01", "rg-h/2": "00"}}


def test_the_arms_compare_on_trained_domains_from_stored_verdicts_without_run_dirs(tmp_path):
    rows = _pair(tmp_path, 0)
    for r in rows:
        r["run_dir"] = str(tmp_path / "gone")
    cmp = compare_arms(rows)
    assert (cmp["curriculum_only"], cmp["uniform_only"], cmp["n_pairs"]) == (1, 1, 3)  # rg-h/1 is not counted


def test_a_seed_without_verdicts_counts_by_its_recorded_pairs_and_one_without_either_is_named(tmp_path):
    rows = _pair(tmp_path, 0)
    old = [{"arm": a, "seed": s, "run_dir": str(tmp_path / "gone"), "trained": {"domains": ["rg-a"]}, "held_out": HELD_OUT}
           for s in (1, 2) for a in ("curriculum", "uniform")]
    old[0]["scheduler_pairs"] = {"curriculum_only": 60, "uniform_only": 22, "n_pairs": 902}
    cmp = compare_arms(rows + old)
    assert (cmp["curriculum_only"], cmp["uniform_only"], cmp["n_pairs"]) == (61, 23, 905)
    assert cmp["seeds"] == [0, 1] and cmp["seeds_without_verdicts"] == [2]


def test_transfer_rebuilds_the_pairs_of_a_row_whose_summary_fixes_them(tmp_path):
    stored = _pair(tmp_path, 0)[0]
    summary_only = {**stored, "verdicts": None, "run_dir": str(tmp_path / "gone")}
    a, b = transfer([stored], "curriculum"), transfer([summary_only], "curriculum")
    assert (a["n"], a["delta"]) == (b["n"], b["delta"]) == (2, 0.5)


def test_fold_merges_a_results_file_made_elsewhere_and_prints_the_pooled_test(tmp_path):
    import subprocess

    pairs = [_pair(tmp_path / f"s{s}", s) for s in (0, 1, 2)]
    for r in pairs[2]:
        r["verdicts"] = None  # an older row: its verdicts come from the run dir, which is still there
    (tmp_path / "R.json").write_text(json.dumps({"rows": pairs[0] + pairs[1], "targets": [], "overrides": ["x=1"]}))
    (tmp_path / "other.json").write_text(json.dumps({"rows": pairs[2], "targets": [], "overrides": []}))
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "hundred_domains.py"), "--fold", str(tmp_path / "other.json"),
                        "--results", str(tmp_path / "R.json")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "curriculum-only passes 3 vs uniform-only 3 over 9 paired tasks, seeds [0, 1, 2] (3 needed)" in r.stdout
    out = json.loads((tmp_path / "R.json").read_text())
    assert [(x["arm"], x["seed"]) for x in out["rows"]] == [(a, s) for s in (0, 1, 2) for a in ("curriculum", "uniform")]
    assert all(x["verdicts"] for x in out["rows"]) and out["overrides"] == ["x=1"]
