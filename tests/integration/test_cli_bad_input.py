"""The real CLI refuses bad input with one line on stderr, before any model work or file write."""

import sys
from pathlib import Path

import pytest
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "posttrain.cli.main"]

# (argv after `posttrain`, text the one-line error must contain)
CASES = [
    (["rl", "examples/tiny_rl.yaml", "rl.loss=ppo"], "rl.loss.name='ppo'"),
    (["rl", "examples/tiny_rl.yaml", "rl.steps=-3"], "rl.steps"),
    (["rl", "examples/tiny_rl.yaml", "engine.name=nope"], "engine.name='nope'"),
    (["rl", "examples/tiny_rl.yaml", "rl.group_size=1"], "rl.group_size=1"),
    (["rl", "examples/tiny_rl.yaml", "tasks.domains={nosuch: {}}"], "tasks.domains.nosuch"),
    (["rl", "examples/tiny_rl.yaml", "--plugin", "no_such_plugin.py"], "no_such_plugin.py"),
    (["sft", "examples/tiny_rl.yaml", "sft.optim.lr=-1"], "sft.optim.lr"),
    (["dpo", "examples/tiny_rl.yaml", "dpo.loss=hinge"], "dpo.loss.name='hinge'"),
    (["rl", "examples/tiny_rl.yaml", "engine.args.bogus=1"], "engine.args.bogus: engine 'fast'"),
    (["rl", "examples/tiny_rl.yaml", "tasks.domains.arithmetic.args.bogus=1"], "tasks.domains.arithmetic.args.bogus"),
    (["quickstart", "--resume", "runs/x", "--vision"], "`posttrain quickstart --vision` does not resume"),
    (["quickstart", "--resume", "runs/x", "--agent"], "`posttrain quickstart --agent` does not resume"),
    # issue 38: key combinations that cannot work
    (["rl", "examples/tiny_rl.yaml", "engine.args.matmul_dtype=bfloat16"], "engine.args.matmul_dtype=bfloat16"),
    (["rl", "examples/tiny_rl.yaml", "rl.overlong.name=soft_penalty", "rl.overlong.args={cache: 8}"],
     "domain 'arithmetic' answers within 8 tokens"),
    (["rl", "examples/tiny_rl.yaml", "tasks.domains={tools: {n_train: 4, n_eval: 2}}", "rl.overlong.name=score"],
     "domain 'tools' runs multi-step episodes"),
    (["rl", "examples/tiny_rl.yaml", "rl.overlong.name=soft_penalty", "rl.overlong.args={cache: 2, bogus: 1}"],
     "rl.overlong.args.bogus"),
    (["rl", "examples/tiny_rl.yaml", "rl.loss=grpo", "rl.loss_norm=constant"], "rl.loss_norm=constant: rl.loss='grpo'"),
    (["rl", "examples/tiny_rl.yaml", "schedule.name=fixed_order"], "the fixed_order policy and an order file"),
]


@pytest.mark.parametrize("argv, named", CASES, ids=[" ".join(c[0][2:]) or c[0][0] for c in CASES])
def test_bad_input_is_one_line_naming_it_and_writes_nothing(tmp_path, argv, named):
    out = tmp_path / "run"
    r = run_cli(argv + ["--out", str(out)], cwd=ROOT, timeout=60)
    assert r.returncode == 2, r.stderr[-1500:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and named in lines[0], r.stderr[-1500:]
    assert not out.exists()  # refused before config.yaml or any other file of the run


def test_a_fixed_order_naming_a_task_outside_the_split_is_one_line_and_writes_nothing(tmp_path):
    from posttrain.config import load_config
    from posttrain.tasks.splits import make_splits

    ids = [t.id for t in make_splits(load_config(ROOT / "examples/tiny_rl.yaml", ["sft.steps=0"])).train[:3]]
    order = tmp_path / "order.txt"
    order.write_text(f"{ids[0]} {ids[1]}\n{ids[2]} not-a-task\n")
    out = tmp_path / "run"
    r = run_cli(["rl", "examples/tiny_rl.yaml", "rl.prompts_per_step=2", "rl.steps=2", "sft.steps=0",
                              "schedule.name=fixed_order", f"schedule.args.order_file={order}", "--out", str(out)],
                       cwd=ROOT, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "step 1 names task 'not-a-task'" in lines[0], r.stderr[-1500:]
    assert not out.exists()


def test_non_empty_out_is_refused_and_left_untouched(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text("name: earlier\n")
    (out / "summary.json").write_text("{}")
    r = run_cli(["rl", "examples/tiny_rl.yaml", "--out", str(out)], cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "is not empty" in r.stderr and "--resume" in r.stderr and "--overwrite" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "summary.json"]
    assert (out / "config.yaml").read_text() == "name: earlier\n"


# commands without --resume: the refusal of a non-empty --out must not suggest it (sft and dpo resume:
# tests/integration/test_cli_sft_resume.py)
NO_RESUME = [["quickstart", "--vision"], ["quickstart", "--agent"]]


@pytest.mark.parametrize("argv", NO_RESUME, ids=[" ".join(a[:2]) for a in NO_RESUME])
def test_non_empty_out_of_a_command_without_resume_suggests_only_overwrite(tmp_path, argv):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text("name: earlier\n")
    r = run_cli(argv + ["--out", str(out)], cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "is not empty" in r.stderr and "--overwrite" in r.stderr, r.stderr[-1500:]
    assert "--resume" not in r.stderr


def test_overwrite_refuses_a_directory_that_is_not_a_run(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    r = run_cli(["rl", "examples/tiny_rl.yaml", "--out", str(out), "--overwrite"], cwd=ROOT,
                       timeout=60)
    assert r.returncode == 2 and "not a run directory" in r.stderr
    assert (out / "thesis.tex").read_text() == "precious"


def test_unsupported_model_engine_pair_is_refused_before_any_model_work(tmp_path):
    import json

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "mixtral"}))
    out = tmp_path / "run"
    r = run_cli(["rl", "examples/tiny_rl.yaml", f"model.path={model}", "engine.name=fast", "--out", str(out)],
                       cwd=ROOT, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "mixtral" in r.stderr, r.stderr[-800:]
    assert not out.exists()
