"""The evaluation runner on the tiny model: records, resume, cache, bad input."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from posttrain.errors import ModelError
from posttrain.eval.modelref import resolve_model
from posttrain.eval.records import EvalError, RecordFile
from posttrain.eval.runner import EvalOptions, evaluate
from posttrain.eval.suite import load_suite


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    return save_policy(*build_tiny(), tmp_path_factory.mktemp("model") / "tiny")


def write_suite(path: Path, n: int = 3, epochs: int = 2, pins: dict | None = None) -> Path:
    from posttrain.tasks import generate_domain

    tasks = generate_domain("arithmetic", n, 10_000, 1.0)
    doc = {"name": "t", "epochs": epochs, "sampling": {"temperature": 0.7, "max_new_tokens": 8},
           "tasks": [{"domain": "arithmetic", "n": n, "seed": 10_000,
                      "pins": pins if pins is not None else {t.id: t.version for t in tasks}}]}
    path.write_text(yaml.safe_dump(doc))
    return path


def run(tiny: Path, suite: Path, out: Path, **kw) -> dict:
    return asyncio.run(evaluate(resolve_model(tiny), load_suite(suite), out, EvalOptions(**kw)))


def test_records_every_sample_with_its_fields(tiny, tmp_path):
    s = run(tiny, write_suite(tmp_path / "s.yaml"), tmp_path / "out")
    recs = RecordFile(tmp_path / "out" / "samples.jsonl").load()
    assert len(recs) == 6 and s["overall"]["samples"] == 6
    r = next(iter(recs.values()))
    assert r.task_version and r.trajectory and r.steps == 1 and r.tokens > 0 and r.wall_s > 0
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["timing"]["wall_s"] > 0


def test_resume_reruns_only_missing_samples(tiny, tmp_path):
    suite, out = write_suite(tmp_path / "s.yaml"), tmp_path / "out"
    run(tiny, suite, out)
    path = out / "samples.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:4]) + lines[4][:30])  # two lost, one torn by a kill mid-write
    kept = {k: r.completion for k, r in list(RecordFile(path).load().items())}
    s = run(tiny, suite, out)
    assert s["run"]["samples_new"] == 2 and s["run"]["samples_resumed"] == 4
    after = RecordFile(path).load()
    assert len(after) == 6 and all(after[k].completion == c for k, c in kept.items())


def test_generation_cache_skips_the_engine(tiny, tmp_path):
    suite, cache = write_suite(tmp_path / "s.yaml"), tmp_path / "gen.sqlite"
    first = run(tiny, suite, tmp_path / "a", cache=cache)
    second = run(tiny, suite, tmp_path / "b", cache=cache)
    assert first["run"]["cache"]["misses"] == 6 and second["run"]["cache"]["hits"] == 6
    assert second["timing"]["generation_s"] == 0.0
    a = RecordFile(tmp_path / "a" / "samples.jsonl").load()
    b = RecordFile(tmp_path / "b" / "samples.jsonl").load()
    assert {k: r.completion for k, r in a.items()} == {k: r.completion for k, r in b.items()}


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(ModelError, match="model not found: .*nope"):
        resolve_model(tmp_path / "nope")


def test_training_run_resolves_to_newest_checkpoint(tiny, tmp_path):
    import shutil

    for step in (5, 40, 10):
        shutil.copytree(tiny, tmp_path / "run" / "checkpoints" / f"step-{step}")
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 0}\n')
    ref = resolve_model(tmp_path / "run")
    assert ref.path.name == "step-40" and ref.source_run == tmp_path / "run"


def test_suite_with_unknown_task_is_refused(tmp_path):
    with pytest.raises(EvalError, match="unknown task id.*arithmetic-10000-99"):
        load_suite(write_suite(tmp_path / "s.yaml", pins={"arithmetic-10000-99": "abc"}))


def test_suite_with_changed_task_version_is_refused(tmp_path):
    with pytest.raises(EvalError, match=r"version\(s\) changed.*arithmetic-10000-0 \(pinned 0000"):
        load_suite(write_suite(tmp_path / "s.yaml", pins={"arithmetic-10000-0": "0000"}))


def test_unknown_builtin_suite_lists_builtins():
    with pytest.raises(EvalError, match="built-in suites: .*regression"):
        load_suite("no-such-suite")


def test_builtin_regression_suite_has_20_to_50_tasks_across_domains():
    s = load_suite("regression")
    assert 20 <= len(s.tasks) <= 50 and len(s.domains) >= 3 and s.epochs == 5


def test_corrupted_record_file_names_the_line(tiny, tmp_path):
    suite, out = write_suite(tmp_path / "s.yaml"), tmp_path / "out"
    run(tiny, suite, out)
    path = out / "samples.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + "{not json\n" + "".join(lines[3:]))
    with pytest.raises(EvalError, match=r"samples.jsonl:3: corrupted sample record"):
        run(tiny, suite, out)


def test_out_dir_of_another_model_is_refused(tiny, tmp_path):
    import shutil

    suite, out = write_suite(tmp_path / "s.yaml"), tmp_path / "out"
    run(tiny, suite, out)
    other = shutil.copytree(tiny, tmp_path / "other")
    cfg = json.loads((other / "generation_config.json").read_text())
    (other / "generation_config.json").write_text(json.dumps({**cfg, "do_sample": True}))
    with pytest.raises(EvalError, match="different model_hash"):
        run(other, suite, out)


def test_cli_eval_missing_model_raises_model_error(cli, tmp_path):
    res = cli("eval", "--model", tmp_path / "nope", "--out", tmp_path / "o", "--no-cache")
    assert isinstance(res.exception, ModelError) and "nope" in str(res.exception)


def test_cli_eval_runs_and_resumes(cli, tiny, tmp_path):
    suite, out = write_suite(tmp_path / "s.yaml", n=2, epochs=1), tmp_path / "o"
    first = cli("eval", "--model", tiny, "--suite", suite, "--out", out, "--no-cache", "--json")
    second = cli("eval", "--model", tiny, "--suite", suite, "--out", out, "--no-cache", "--json")
    assert first.exit_code == 0 and second.exit_code == 0, first.output
    assert json.loads(second.stdout)["summary"]["run"]["samples_resumed"] == 2


def test_eval_builds_an_engine_that_takes_no_max_batch_without_it(tiny, monkeypatch):
    """vllm's case (it schedules its own batches): eval's generation concurrency is not forced on it."""
    from posttrain.eval.runner import _build
    from posttrain.registry import registry

    got = {}

    def nobatch(model, tokenizer, seed=0):
        got.update(seed=seed)
        return object()
    # removed again after the test; it declares, as an engine does where it registers, that it takes no max_batch
    monkeypatch.setitem(registry("engine")._items, "nobatch", nobatch)
    monkeypatch.setitem(registry("engine")._props, "nobatch",
                        {"inflight_weights": False, "max_batch_arg": False, "model_check": None})
    _build(resolve_model(tiny), "nobatch", 7)
    assert got == {"seed": 0}


def test_eval_gives_its_generation_concurrency_to_an_engine_that_batches_by_it(tiny):
    from posttrain.eval.runner import _build

    engine, _ = _build(resolve_model(tiny), "hf", 7)
    assert engine.max_batch == 7


def test_eval_with_the_vllm_engine_is_not_refused_for_max_batch(tiny, tmp_path):
    import importlib.util

    from posttrain.errors import ConfigError

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed: this checks the error of an absent one")
    # before: "engine.args.max_batch: engine 'vllm' takes no argument 'max_batch'" (eval passed it)
    with pytest.raises(ConfigError, match="engine 'vllm' needs the vllm package"):
        run(tiny, write_suite(tmp_path / "s.yaml"), tmp_path / "out", engine="vllm")


def test_a_builtin_suite_name_is_not_shadowed_by_a_folder_of_that_name(tmp_path, monkeypatch):
    """`posttrain eval tools` in a checkout that has a tools/ folder (this repository has one) still
    means the built-in suite; a folder is never a suite file."""
    from posttrain.eval.suite import BUILTIN_DIR, resolve_suite_path

    (tmp_path / "tools").mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_suite_path("tools") == BUILTIN_DIR / "tools.yaml"
