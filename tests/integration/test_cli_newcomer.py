"""A new user's mistakes through the real CLI (issue 44): each is answered by one clear line
before any work, or by an exit code that says the run failed; evals can be sized; tables fit
80 columns; every summary names how it sampled.

The eval tests use a deterministic engine from a plugin (it answers "1 3" and stops) so that
the verifier really runs on the tiny model's prompts: the untrained tiny model never stops
inside a small budget, and the format rule would score it before any verifier is called."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "posttrain.cli.main"]

ENGINE = '''
from posttrain.registry import engine
from posttrain.rollout.engine import Completion

@engine("newcomer_answer", inflight_weights=False, max_batch_arg=False, model_check=None)
class AnswerEngine:
    """Answers every request with "1 3" and an end of turn."""
    def __init__(self, model, tokenizer):
        self.tok, self.weights_version = tokenizer, 0
    def generate(self, requests):
        ids = tuple(self.tok.encode("1 3", add_special_tokens=False))
        return [Completion(r.id, i, ids, (0.0,) * len(ids), "1 3", "stop") for r in requests for i in range(r.params.n)]
    def load_weights(self, state, version):
        self.weights_version = version
'''
VERIFIER = '''
from posttrain.registry import verifier
from posttrain.types import VerifyResult

@verifier("newcomer_sorted", answer_format="line")
class Sorted:
    def __init__(self, answer=""):
        self.answer = answer
    async def __call__(self, task, traj, ctx):
        {body}
'''
BROKEN = "raise RuntimeError(\"the answer key is missing\")"
WORKING = "ok = traj.completion_text.strip() == self.answer\n        return VerifyResult(float(ok), ok)"


def posttrain(*args, cwd=ROOT, env=None, timeout=240) -> subprocess.CompletedProcess:
    return run_cli([str(a) for a in args], cwd=cwd, timeout=timeout,
                          env={**os.environ, **(env or {})})


def one_line(r: subprocess.CompletedProcess) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-1500:]
    return lines[0]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A tiny model, the plugins and a 6-task suite over two domains (task file beside the suite)."""
    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    d = tmp_path_factory.mktemp("newcomer")
    save_policy(*build_tiny(), d / "tiny")
    (d / "engine.py").write_text(ENGINE)
    (d / "broken.py").write_text(VERIFIER.format(body=BROKEN))
    (d / "working.py").write_text(VERIFIER.format(body=WORKING))
    rows = [{"id": f"sort-{i}", "domain": "sortnums" if i % 2 else "ordering",
             "prompt": [{"role": "user", "content": f"Sort 3 {i} 1"}],
             "verifier": {"name": "newcomer_sorted", "args": {"answer": "1 3"}}, "limits": {"max_new_tokens": 4}}
            for i in range(8)]
    (d / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "suite.yaml").write_text(yaml.safe_dump({"name": "sorting", "epochs": 2, "sampling": {"max_new_tokens": 4},
                                                  "tasks": [{"file": "tasks.jsonl"}]}))
    (d / "empty.jsonl").write_text("")
    return d


def evaluate(home: Path, out: Path, *extra, verifier="working.py", model=None):
    plugins = ["--plugin", home / verifier, "--plugin", home / "engine.py", "--engine", "newcomer_answer"]
    return posttrain("eval", "--model", model or home / "tiny", "--suite", home / "suite.yaml", "--out", out,
                     "--no-cache", *plugins, *extra)


# 1. infrastructure errors ----------------------------------------------------------------

@pytest.fixture(scope="module")
def broken_run(home, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """An eval whose verifier raises on every sample (the plugin's bug)."""
    out = tmp_path_factory.mktemp("broken") / "e"
    return out, evaluate(home, out, verifier="broken.py")


def test_an_eval_whose_every_sample_is_an_infra_error_exits_2_naming_the_cause(broken_run):
    r = broken_run[1]
    assert r.returncode == 2, r.stderr[-1500:]
    last = r.stderr.strip().splitlines()[-1]
    assert "16 of 16 samples (100%)" in last and "verifier raised RuntimeError: the answer key is missing" in last


def test_a_rerun_redoes_the_infra_error_samples_instead_of_resuming_them(home, broken_run, tmp_path):
    import shutil

    out = tmp_path / "e"
    shutil.copytree(broken_run[0], out)
    r = evaluate(home, out, "--json")  # the plugin fixed
    assert r.returncode == 0, r.stderr[-1500:]
    run = json.loads(r.stdout)["summary"]
    assert (run["run"]["samples_new"], run["run"]["samples_resumed"]) == (16, 0)
    assert run["overall"]["infra_errors"] == 0 and run["overall"]["pass@1"] == 1.0


def test_eval_overwrite_starts_afresh(home, two_runs, tmp_path):
    import shutil

    out = tmp_path / "e"
    shutil.copytree(two_runs[1][0], out)  # a finished run: without --overwrite all 16 would resume
    r = evaluate(home, out, "--overwrite", "--json")
    assert r.returncode == 0, r.stderr[-1500:]
    assert json.loads(r.stdout)["summary"]["run"]["samples_resumed"] == 0


def test_eval_overwrite_refuses_a_directory_that_is_not_an_evaluation(home, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    assert "not an evaluation run directory" in one_line(evaluate(home, out, "--overwrite"))
    assert (out / "thesis.tex").read_text() == "precious"


def test_a_forgotten_plugin_is_refused_before_the_model_loads(home, tmp_path):
    out = tmp_path / "e"
    r = posttrain("eval", "--model", home / "tiny", "--suite", home / "suite.yaml", "--out", out)
    assert "'newcomer_sorted'" in one_line(r) and "--plugin" in r.stderr
    assert not out.exists()


# 2. empty task sources ---------------------------------------------------------------------

def _empty_cases(home: Path, out: Path) -> dict[str, list]:
    suite = home / "empty_suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "e", "tasks": [{"file": "empty.jsonl"}]}))
    pinned_none = home / "no_pins_suite.yaml"
    pinned_none.write_text(yaml.safe_dump({"name": "p", "tasks": [{"file": "tasks.jsonl", "pins": {}}]}))
    return {
        "tasks validate": ["tasks", "validate", home / "empty.jsonl"],
        "tasks check": ["tasks", "check", home / "empty.jsonl"],
        "eval suite": ["eval", "--model", home / "tiny", "--suite", suite, "--out", out],
        "eval all-filtered": ["eval", "--model", home / "tiny", "--suite", pinned_none, "--out", out,
                              "--plugin", home / "working.py"],
        "rl tasks.files": ["rl", "examples/tiny_rl.yaml", f"tasks.files=[{home / 'empty.jsonl'}]", "--out", out],
    }


@pytest.mark.parametrize("case", ["tasks validate", "tasks check", "eval suite", "eval all-filtered", "rl tasks.files"])
def test_an_empty_task_source_is_refused_at_load_naming_the_file(home, tmp_path, case):
    out = tmp_path / "run"
    line = one_line(posttrain(*_empty_cases(home, out)[case]))
    assert "empty.jsonl" in line or "no_pins_suite.yaml" in line, line
    assert "no task" in line
    assert not out.exists()  # nothing left behind: a retry is not refused as a non-empty --out


# 3. sizing an eval -------------------------------------------------------------------------

def test_eval_limit_takes_a_seeded_sample_stratified_by_domain(home, tmp_path):
    # which tasks a seed picks is tests/unit/eval/test_sizing.py's; here: the CLI runs that sample
    r = evaluate(home, tmp_path / "e", "--limit", "4", "--json")
    assert r.returncode == 0, r.stderr[-1500:]
    summary = json.loads(r.stdout)["summary"]
    assert summary["run"]["limit"] == 4 and summary["run"]["samples_new"] == 4 * 2
    assert {d: g["tasks"] for d, g in summary["domains"].items()} == {"ordering": 2, "sortnums": 2}


def test_eval_prints_a_time_estimate_after_its_first_small_batch(two_runs):
    r = two_runs[1][1]
    assert "16 samples to run" in r.stderr and "estimate:" in r.stderr and "s per sample" in r.stderr


# 5, 6, 10. what a summary and a comparison say --------------------------------------------

def test_the_summary_names_its_sampling_and_does_not_repeat_pass_at_1(two_runs):
    r = two_runs[0][1]  # --epochs 1 --temperature 0
    assert "sampling: greedy, 1 epoch, budget 4 tokens" in r.stdout
    header = next(line for line in r.stdout.splitlines() if "pass@1" in line)
    assert header.count("pass@1") == 1 and "pass^1" not in header


@pytest.fixture(scope="module")
def two_runs(home, tmp_path_factory) -> list[tuple[Path, subprocess.CompletedProcess]]:
    """A: greedy, one epoch; B: the suite's defaults (greedy here, two epochs). (run dir, its eval's output)."""
    import shutil

    d = tmp_path_factory.mktemp("cmp")
    train = d / "train-run"  # B's model comes from a training run whose own held-out eval was greedy, one sample
    shutil.copytree(home / "tiny", train / "checkpoints" / "step-5")
    (train / "summary.json").write_text(json.dumps({"eval": {"temperature": 0.0, "seed": 0, "samples_per_task": 1}}))
    runs = []
    for name, extra, model in (("a", ["--epochs", "1", "--temperature", "0"], None), ("b", [], train)):
        r = evaluate(home, d / name, *extra, model=model)
        assert r.returncode == 0, r.stderr[-1500:]
        runs.append((d / name, r))
    return runs


def test_compare_fits_80_columns_and_keeps_the_full_table_in_the_report(two_runs):
    (a, _), (b, _) = two_runs
    r = posttrain("compare", a, b, env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr[-1500:]
    assert max(len(line) for line in r.stdout.splitlines()) <= 80, r.stdout
    assert "…" not in r.stdout and "sortnums" in r.stdout and "unchanged" in r.stdout
    html = (b / "report.html").read_text()
    assert "Δtokens [CI]" in html and "P→F / F→P" in html


def test_compare_warns_when_the_two_sides_were_sampled_differently(two_runs):
    r = posttrain("compare", two_runs[0][0], two_runs[1][0], "--json")
    assert r.returncode == 0, r.stderr[-1500:]
    warnings = json.loads(r.stdout)["warnings"]
    assert len(warnings) == 2, warnings
    assert "A: greedy, 1 epoch" in warnings[0] and "B: greedy, 2 epochs" in warnings[0]
    assert "the run that produced its model" in warnings[1] and "--temperature 0 --epochs 1" in warnings[1]


# 8. serve ----------------------------------------------------------------------------------

def test_serve_accepts_a_training_run_directory(home, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(home / "tiny", run / "checkpoints" / "step-7")
    proc = subprocess.Popen(CLI + ["serve", str(run), "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert first.startswith("posttrain serve: step-7 on http://"), err[-1500:]


@pytest.mark.parametrize("arg", ["runs/no-such-run", "./my-model"])
def test_serve_reports_a_mistyped_path_as_a_missing_path(arg):
    line = one_line(posttrain("serve", arg))
    assert f"model not found: {ROOT / arg.removeprefix('./')}" in line and "unknown model" not in line


# 9. relative paths -----------------------------------------------------------------------

def test_tasks_files_are_relative_to_the_config_yaml(home, tmp_path):
    sub = tmp_path / "project"
    sub.mkdir()
    (sub / "run.yaml").write_text("tasks:\n  files: [absent.jsonl]\n")
    line = one_line(posttrain("rl", sub / "run.yaml", "--out", tmp_path / "out"))
    assert f"task file not found: {sub / 'absent.jsonl'}" in line


def test_a_config_with_a_relative_task_file_passes_its_checks(home, tmp_path):
    sub = tmp_path / "project"
    sub.mkdir()
    (sub / "mine.jsonl").write_text((home / "tasks.jsonl").read_text())
    (sub / "run.yaml").write_text(f"plugins: [{home / 'working.py'}]\ntasks:\n  files: [mine.jsonl]\n")
    # engine.name=vllm is checked after the task files: reaching it means mine.jsonl was found beside run.yaml
    line = one_line(posttrain("rl", sub / "run.yaml", "engine.name=vllm", "--out", tmp_path / "out"))
    assert "vllm" in line and "task file" not in line


# 10, 11. config mistakes and availability, before any work --------------------------------

def test_every_unknown_config_key_is_reported_at_once_with_did_you_mean(tmp_path):
    line = one_line(posttrain("rl", "examples/tiny_rl.yaml", "rl.stepz=3", "rl.lrr=0.1", "--out", tmp_path / "o"))
    assert "'rl.stepz' (did you mean 'rl.steps'?)" in line and "'rl.lrr' (did you mean 'rl.lr'?)" in line


def test_an_unknown_registry_name_gets_a_did_you_mean(tmp_path):
    line = one_line(posttrain("rl", "examples/tiny_rl.yaml", "rl.loss=grp", "--out", tmp_path / "o"))
    assert "did you mean 'grpo'?" in line


def test_an_engine_that_is_not_installed_is_refused_before_any_work(tmp_path):
    out = tmp_path / "o"
    r = posttrain("rl", "examples/tiny_rl.yaml", "engine.name=vllm", "--out", out)
    assert "vllm package, which is not installed" in one_line(r)
    assert r.stdout == "" and not out.exists()  # no phase ran: no splits, no base model
