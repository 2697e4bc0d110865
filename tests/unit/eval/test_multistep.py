"""Multi-step tasks in `posttrain eval`: agent episodes, cached replays, re-scoring, and suite coverage."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
import yaml
from tests.unit.agent.conftest import ScriptedEngine, shell_task, steps_policy

from posttrain.eval.modelref import resolve_model
from posttrain.eval.records import RecordFile
from posttrain.eval.runner import EvalOptions, evaluate
from posttrain.eval.suite import load_suite
from posttrain.rollout.agent.toolcall import format_tool_call
from posttrain.sandbox import SandboxPool

WRITE = format_tool_call("bash", {"command": "echo hello > out.txt"})
SUBMIT = format_tool_call("submit", {})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    return save_policy(*build_tiny(), tmp_path_factory.mktemp("model") / "tiny")


def shell_suite(path: Path, n: int = 2, epochs: int = 1) -> Path:
    from posttrain.tasks.io import save_tasks

    # distinct starting files: two tasks with one prompt and one environment share a cache key
    tasks = [dataclasses.replace(t, environment=dataclasses.replace(t.environment, files={"seed.txt": f"{i}\n"}))
             for i, t in enumerate(shell_task(i) for i in range(n))]
    save_tasks(tasks, path.parent / "shell.jsonl")
    doc = {"name": "shell", "epochs": epochs, "sampling": {"temperature": 0.0, "max_new_tokens": 64},
           "tasks": [{"file": "shell.jsonl", "pins": {t.id: t.version for t in tasks}}]}
    path.write_text(yaml.safe_dump(doc))
    return path


class Refusing:
    """An engine that must not be called (every sample should come from the cache)."""

    weights_version = 0
    max_len = 4096

    def generate(self, requests):
        raise AssertionError(f"the model was called for {len(requests)} request(s)")


def evaluate_with(engine_fn, tiny: Path, suite: Path, out: Path, monkeypatch, **kw) -> dict:
    import posttrain.eval.runner as runner
    from posttrain.models.tiny import build_tokenizer

    tok = build_tokenizer()
    monkeypatch.setattr(runner, "_build", lambda ref, engine, batch: (engine_fn(tok), tok))
    return with_pool(lambda pool: evaluate(resolve_model(tiny), load_suite(suite), out, EvalOptions(**kw), sandbox=pool))


def with_pool(fn):
    """asyncio.run(fn(pool)) with a real sandbox pool, closed afterwards."""
    async def main():
        pool = SandboxPool(concurrency=2)
        try:
            return await fn(pool)
        finally:
            await pool.close()

    return asyncio.run(main())


def solved_run(tiny: Path, tmp_path: Path, monkeypatch) -> Path:
    """An evaluation run whose two shell episodes wrote the file and passed."""
    out = tmp_path / "out"
    evaluate_with(lambda tok: ScriptedEngine(tok, steps_policy(WRITE, SUBMIT)), tiny, shell_suite(tmp_path / "s.yaml"),
                  out, monkeypatch)
    return out


def test_multi_step_task_runs_as_a_scored_agent_episode(tiny, tmp_path, monkeypatch):
    s = evaluate_with(lambda tok: ScriptedEngine(tok, steps_policy(WRITE, SUBMIT)), tiny,
                      shell_suite(tmp_path / "s.yaml"), tmp_path / "out", monkeypatch)
    recs = list(RecordFile(tmp_path / "out" / "samples.jsonl").load().values())
    assert [r.status for r in recs] == ["ok", "ok"] and all(r.passed for r in recs)
    assert all(r.steps == 2 for r in recs) and s["domains"]["terminal"]["steps"] == 2.0


def test_a_suite_token_budget_ends_an_episode_before_its_step_limit(tiny, tmp_path, monkeypatch):
    suite = shell_suite(tmp_path / "s.yaml", n=1)
    doc = yaml.safe_load(suite.read_text())
    suite.write_text(yaml.safe_dump(doc | {"sampling": doc["sampling"] | {"token_budget": 200}}))
    evaluate_with(lambda tok: ScriptedEngine(tok, steps_policy(WRITE)), tiny, suite, tmp_path / "out", monkeypatch)
    rec, = RecordFile(tmp_path / "out" / "samples.jsonl").load().values()  # the policy never submits: 6 steps unbounded
    assert rec.trajectory["finish_reason"] == "token_budget" and 1 <= rec.steps < 6


@pytest.mark.parametrize("budget", [0, -5, "many", True])
def test_a_suite_token_budget_that_is_not_a_positive_count_is_refused_naming_the_file(tmp_path, budget):
    from posttrain.eval.records import EvalError

    suite = shell_suite(tmp_path / "s.yaml", n=1)
    doc = yaml.safe_load(suite.read_text())
    suite.write_text(yaml.safe_dump(doc | {"sampling": {"token_budget": budget}}))
    with pytest.raises(EvalError, match=rf"{tmp_path / 's.yaml'}: sampling.token_budget must be a positive number"):
        load_suite(suite)


def test_a_suite_tools_prompt_decides_whether_the_episode_lists_its_tools(tiny, tmp_path, monkeypatch):
    seen = {}
    for mode in ("text", "none"):
        suite = shell_suite(tmp_path / f"{mode}.yaml", n=1)
        doc = yaml.safe_load(suite.read_text())
        suite.write_text(yaml.safe_dump(doc | {"sampling": doc["sampling"] | {"tools_prompt": mode}}))
        prompts = []

        def policy(text, prompts=prompts):
            prompts.append(text)
            return SUBMIT

        evaluate_with(lambda tok: ScriptedEngine(tok, policy), tiny, suite, tmp_path / mode, monkeypatch)
        seen[mode] = prompts[0]
    assert '"name": "shell"' in seen["text"] and '"name": "shell"' not in seen["none"]


def test_a_suite_tools_prompt_that_is_not_a_mode_is_refused_naming_the_file(tmp_path):
    from posttrain.eval.records import EvalError

    suite = shell_suite(tmp_path / "s.yaml", n=1)
    doc = yaml.safe_load(suite.read_text())
    suite.write_text(yaml.safe_dump(doc | {"sampling": {"tools_prompt": "json"}}))
    with pytest.raises(EvalError, match=rf"{tmp_path / 's.yaml'}: sampling.tools_prompt must be one of auto"):
        load_suite(suite)


def test_failed_episode_counts_as_failure_not_infra(tiny, tmp_path, monkeypatch):
    s = evaluate_with(lambda tok: ScriptedEngine(tok, steps_policy(SUBMIT)), tiny,
                      shell_suite(tmp_path / "s.yaml"), tmp_path / "out", monkeypatch)
    assert s["overall"]["infra_errors"] == 0 and s["overall"]["pass@1"] == 0.0


def test_cached_episode_is_replayed_in_a_fresh_sandbox_without_the_model(tiny, tmp_path, monkeypatch):
    suite, cache = shell_suite(tmp_path / "s.yaml"), tmp_path / "gen.sqlite"
    evaluate_with(lambda tok: ScriptedEngine(tok, steps_policy(WRITE, SUBMIT)), tiny, suite, tmp_path / "a",
                  monkeypatch, cache=cache)
    s = evaluate_with(lambda tok: Refusing(), tiny, suite, tmp_path / "b", monkeypatch, cache=cache)
    recs = list(RecordFile(tmp_path / "b" / "samples.jsonl").load().values())
    # passing needs out.txt in the new session: the recorded bash call really ran again
    assert all(r.cached and r.passed and r.steps == 2 for r in recs) and s["run"]["cache"]["hits"] == 2


def test_reverify_replays_episodes_and_finds_no_flakes(tiny, tmp_path, monkeypatch):
    from posttrain.eval.reverify import reverify_run

    out = solved_run(tiny, tmp_path, monkeypatch)
    rep = with_pool(lambda pool: reverify_run(out, 2, pool))
    assert rep["samples"] == 2 and rep["flaky_samples"] == 0
    assert all(t["infra"] == 0 for t in rep["tasks"].values())


def test_replay_that_diverges_is_an_engine_error_naming_the_step():
    from posttrain.eval.episodes import ReplayEngine
    from posttrain.models.tiny import build_tokenizer
    from posttrain.rollout.engine import GenRequest
    from posttrain.types import Trajectory

    rec = Trajectory("sh-0", "v", "terminal", (1,), ())
    c = ReplayEngine(build_tokenizer(), {"sh-0": rec}).generate([GenRequest((1, 2), id="0:sh-0:0:0")])[0]
    assert c.finish_reason == "error" and "sh-0" in c.error and "step 0" in c.error


def test_builtin_suites_cover_every_shipped_domain():
    import posttrain.tasks.math_problems  # noqa: F401  (registers math)
    from posttrain.eval.suite import builtin_suites
    from posttrain.registry import registry

    covered = {d for name in builtin_suites() for d in load_suite(name).domains}
    # τ²-bench episodes need a simulated user (a second model): Tau2Runner and benchmarks/tau2_bench.py run them
    covered |= {"tau2_airline", "tau2_retail", "tau2_mock"}
    assert set(registry("domain").names()) <= covered


@pytest.mark.parametrize("name", ["terminal", "tools", "scene", "chart", "humaneval", "needle"])
def test_builtin_suite_loads_with_pinned_versions(name):
    suite = load_suite(name)
    assert suite.tasks and {t.domain for t in suite.tasks} == {name}


def test_replay_command_replays_episodes_unchanged(tiny, tmp_path, monkeypatch):
    from posttrain.eval.replay import replay_run

    out = solved_run(tiny, tmp_path, monkeypatch)
    diffs = with_pool(lambda pool: replay_run(out, sandbox=pool))
    assert len(diffs) == 2 and not any(d.changed for d in diffs) and all(d.new["passed"] for d in diffs)


def test_image_tasks_evaluate_on_a_vision_model(tmp_path):
    from posttrain.models.vlm import build_tiny_vlm, is_vision_dir, save_vlm

    model = save_vlm(*build_tiny_vlm(), tmp_path / "vlm")
    assert is_vision_dir(model)
    suite = tmp_path / "chart.yaml"
    suite.write_text(yaml.safe_dump({"name": "c", "sampling": {"temperature": 0.0, "max_new_tokens": 4},
                                     "tasks": [{"domain": "chart", "n": 3, "seed": 10_000}]}))
    s = asyncio.run(evaluate(resolve_model(model), load_suite(suite), tmp_path / "out", EvalOptions()))
    assert s["overall"]["samples"] == 3 and s["overall"]["infra_errors"] == 0


def test_image_tasks_with_different_pictures_get_different_cache_keys():
    from posttrain.eval.runner import _keyed_sampling
    from posttrain.tasks import generate_domain

    a, b = generate_domain("chart", 2, 10_000)
    assert _keyed_sampling(a, {}) != _keyed_sampling(b, {})
