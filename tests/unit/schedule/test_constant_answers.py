"""benchmarks/constant_answers.py: a run's held-out lift, and the part of it a constant answer explains."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from posttrain.registry import build
from posttrain.tasks.io import task_to_dict

pytest.importorskip("reasoning_gym")
ROOT = Path(__file__).resolve().parents[3]


def _run(tmp_path: Path) -> tuple[Path, list]:
    """A finished run on 10 syllogisms whose policy learned to answer "Yes" to every one."""
    from posttrain.builtins import load_builtins

    load_builtins()
    tasks = build("rg-syllogism", kind="domain").generate(10, 1, 1.0)
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "heldout.jsonl").write_text("".join(json.dumps(task_to_dict(t)) + "\n" for t in tasks))
    domain_of = {t.id: t.domain for t in tasks}
    before = {"passed": {t.id: False for t in tasks}, "domain_of": domain_of, "completions": {t.id: "" for t in tasks}}
    after = {"passed": {t.id: t.oracle == "Yes" for t in tasks}, "domain_of": domain_of,
             "completions": {t.id: "Yes" for t in tasks}}
    (tmp_path / "eval_before.json").write_text(json.dumps(before))
    (tmp_path / "eval_after.json").write_text(json.dumps(after))
    gen = {"trained_domains": {"domains": ["rg-syllogism"]}, "held_out_domains": {"domains": []}}
    (tmp_path / "summary.json").write_text(json.dumps({"generalisation": gen}))
    return tmp_path, tasks


def test_a_policy_answering_one_constant_gains_nothing_above_the_constant(tmp_path):
    run, tasks = _run(tmp_path)
    yes = sum(t.oracle == "Yes" for t in tasks)
    assert 0 < yes < len(tasks)  # both labels present: the check means something
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "constant_answers.py"), str(run)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    best = max(yes, len(tasks) - yes)
    assert f"best constant per domain {best / len(tasks):.3f}" in r.stdout
    assert f"fail -> pass flips: {yes}, of which {yes if best == yes else 0} answered the domain's best constant" in r.stdout
    if best == yes:  # every gain is the constant's: none on the tasks it fails
        assert f"on the {len(tasks) - yes} tasks the best constant fails: before 0.000, after 0.000" in r.stdout


def test_a_directory_that_is_not_a_finished_run_is_named(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "constant_answers.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "not a finished quickstart run (missing" in r.stderr
