"""make-data: needle depths, conflict rules, reader rows, demonstrations, the verifier."""

from __future__ import annotations

import asyncio
import json

import pytest

from posttrain.errors import ConfigError
from posttrain.longctx.data import conflict_tasks, needle_tasks, reader_rows
from posttrain.longctx.demos import demonstration
from posttrain.longctx.make import make_data
from posttrain.longctx.reward import CitedAnswer
from posttrain.longctx.synth import make_document
from posttrain.longctx.tokens import CharTokenizer
from posttrain.registry import build
from posttrain.tasks.io import load_tasks
from posttrain.types import Trajectory, Turn


def traj(text: str) -> Trajectory:
    return Trajectory("t", "v", "d", (), (Turn("assistant", text),))


def score(v, task, text):
    return asyncio.run(v(task, traj(text), None))


def test_needle_depth_places_the_gold_span():
    first, *_, last = needle_tasks(5, seed=1, lengths=(2000,), depths=(0.0, 0.25, 0.5, 0.75, 1.0))
    body = last.prompt[0].content.split("\n\nQuestion:")[0]
    assert first.metadata["gold_start"] == 0
    assert last.metadata["gold_end"] == len(body)
    assert body[last.metadata["gold_start"] : last.metadata["gold_end"]].endswith(f"is {last.oracle}.")


def test_needle_distractors_are_other_names_with_the_same_phrase():
    t = needle_tasks(1, seed=2, lengths=(3000,), n_needles=2, distractors=3)[0]
    assert t.prompt[0].content.count("The secret number of") == 5


def test_needle_oracle_passes_its_own_verifier_and_a_wrong_answer_fails():
    t = needle_tasks(1, seed=3)[0]
    v = build(t.verifier, kind="verifier")
    assert score(v, t, t.oracle).passed and not score(v, t, str(int(t.oracle) + 1)).passed


def test_conflict_winner_follows_the_stated_rule():
    for t in conflict_tasks(20, seed=4):
        text, win = t.prompt[0].content, t.metadata["winner"]
        heads = {ln.split("]")[0][1:]: ln for ln in text.splitlines() if ln.startswith("[D")}
        dates = {k: v.split("date ")[1].split(",")[0] for k, v in heads.items()}
        ranks = {k: int(v.rsplit("rank ", 1)[1]) for k, v in heads.items()}
        expect = max(dates, key=dates.get) if t.metadata["rule"] == "recent" else min(ranks, key=ranks.get)
        assert win == expect


def test_cited_answer_needs_value_and_the_right_citation():
    t = conflict_tasks(1, seed=5)[0]
    v = CitedAnswer(**{k: t.verifier.args[k] for k in ("answer", "cite")})
    value, cite = t.oracle.split()
    assert score(v, t, t.oracle).score == 1.0
    assert score(v, t, f"{value} [D9]").score == pytest.approx(0.3)
    assert score(v, t, f"{value}{value} {cite}").score == 0.0  # the value must be a whole token


def test_cited_answer_scores_0_when_it_also_names_a_losing_sources_value():
    t = conflict_tasks(1, seed=5)[0]
    v = build(t.verifier, kind="verifier")
    value, cite = t.oracle.split()
    loser = t.verifier.args["others"][0]
    assert score(v, t, f"{value} or {loser} {cite}").score == 0.0  # hedging over the sources
    assert score(v, t, f"{loser}, {value} {cite}").score == 0.0


def test_cited_answer_does_not_read_a_value_inside_a_longer_number():
    t = conflict_tasks(1, seed=5)[0]
    v = CitedAnswer(answer="200", cite="D1")
    assert score(v, t, "1,200 [D1]").score == 0.0 and score(v, t, "200.5 [D1]").score == 0.0
    assert score(v, t, "It is 200. [D1]").score == 1.0  # a full stop after it is still the value


def test_reader_rows_fit_the_budget_and_teach_not_found():
    tasks = needle_tasks(4, seed=6, lengths=(1500,))
    rows = reader_rows(tasks, CharTokenizer(), chunk_tokens=120)
    targets = [r["messages"][-1]["content"] for r in rows]
    assert targets.count("not found") == 4 and all(t == "not found" or t.split()[0] in {x.oracle for x in tasks} for t in targets)


def test_demonstration_ends_with_a_verified_citation():
    sd = make_document(8, 8000, "markdown", n_questions=1)
    msgs = demonstration(sd.doc, sd.qa[0])
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    answer = msgs[-1].content
    span = answer.split("[")[1].rstrip("]").split(":")[1]
    s, e = map(int, span.split("-"))
    assert answer.startswith(sd.qa[0].answer) and sd.qa[0].answer in sd.doc[s:e]


def test_make_data_writes_loadable_tasks_and_a_manifest(tmp_path):
    m = make_data(tmp_path, seed=0, n_needle=6, n_conflict=4, n_demo=2, lengths=(800,))
    assert len(load_tasks(tmp_path / "needle_tasks.jsonl")) == 6 and len(load_tasks(tmp_path / "conflict_tasks.jsonl")) == 4
    rows = (tmp_path / "sft.jsonl").read_text().splitlines()
    assert len(rows) == m["sft_rows"] and all(json.loads(r)["messages"][-1]["role"] == "assistant" for r in rows)
    assert json.loads((tmp_path / "manifest.json").read_text())["seed"] == 0


def test_make_data_rejects_bad_knobs(tmp_path):
    with pytest.raises(ConfigError, match="depths"):
        make_data(tmp_path, depths=(1.5,))


def test_conflict_verifier_builds_from_its_spec_by_name():
    t = conflict_tasks(1, seed=9)[0]
    assert score(build(t.verifier, kind="verifier"), t, t.oracle).passed
