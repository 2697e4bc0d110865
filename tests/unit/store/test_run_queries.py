"""RunQueries: the reads of trajectories.sqlite (posttrain/store/run_queries.py), against a
store written by the real TrajectoryStore."""

from __future__ import annotations

import pytest

from posttrain.store.run import RunDir
from posttrain.store.run_queries import Filters
from posttrain.types import TrajError, Trajectory, Turn, VerifyResult


def _t(step: int, grp: int, sample: int, reward: float, text: str = "x", task: str = "t0", domain: str = "code",
       infra: bool = False, rule: str | None = None) -> Trajectory:
    v = VerifyResult.infra("down") if infra else VerifyResult(reward, reward >= 1.0, details={"rule": rule} if rule else {})
    return Trajectory(task, "v1", domain, (1, 2), (Turn("user", "q", (3,), ()), Turn("assistant", text, (4,), (-0.5,))),
                      weights_version=step, reward=reward, verify=v, step=step, group=grp, sample=sample,
                      error=TrajError("sandbox", "down") if infra else None)


@pytest.fixture()
def run(tmp_path):
    """Steps 0-2, one group of three each, task t<step>; step 1's sample 2 is an infra error."""
    r = RunDir(tmp_path)
    store = r.store()
    for step in range(3):
        trajs = [_t(step, 0, s, float(s == 0), text=f"ans{s}" * (s + 1), task=f"t{step}",
                    domain="code" if step < 2 else "math", infra=(step, s) == (1, 2), rule="format" if s == 1 else None)
                 for s in range(3)]
        store.put_many(trajs, advantages=[1.0, -0.5, None if step == 1 else -0.5])
    store.close()
    return r


def _q(run):
    return run.queries()


def test_page_counts_every_match_and_returns_one_page(run):
    with _q(run) as q:
        page = q.page(Filters(), offset=2, limit=3)
    assert page["total"] == 9 and [(r["step"], r["sample"]) for r in page["rows"]] == [(0, 2), (1, 0), (1, 1)]


def test_page_rows_carry_the_stored_advantage(run):
    with _q(run) as q:
        rows = q.page(Filters(step_min=1, step_max=1))["rows"]
    assert [r["advantage"] for r in rows] == [1.0, -0.5, None]


def test_page_preview_is_the_completion_text(run):
    with _q(run) as q:
        assert q.page(Filters(step_min=0, step_max=0))["rows"][1]["preview"] == "ans1ans1"


def test_advantage_filter_drops_rows_without_one(run):
    with _q(run) as q:
        rows = q.page(Filters(adv_max=0.0))["rows"]
    assert [(r["step"], r["sample"]) for r in rows] == [(0, 1), (0, 2), (1, 1), (2, 1), (2, 2)]


def test_trajectory_is_the_stored_json_with_its_advantage(run):
    with _q(run) as q:
        t = q.trajectory("train", 2, 0, 0)
    assert (t["task_id"], t["turns"][1]["text"], t["advantage"]) == ("t2", "ans0", 1.0)


def test_a_missing_trajectory_is_none(run):
    with _q(run) as q:
        assert q.trajectory("train", 9, 0, 0) is None


def test_group_holds_its_samples_in_order_with_completions(run):
    with _q(run) as q:
        g = q.group("train", 1, 0)
    assert (g["task_id"], [s["completion"] for s in g["samples"]]) == ("t1", ["ans0", "ans1ans1", "ans2ans2ans2"])


def test_nearest_group_prefers_the_earlier_step_on_a_tie(run):
    with _q(run) as q:
        assert (q.nearest_group("train", "t1", 5), q.nearest_group("train", "nope", 0)) == ((1, 0), None)


def test_facets_list_domains_steps_and_statuses(run):
    with _q(run) as q:
        f = q.facets()
    assert (f["domains"], f["steps"], f["count"], sorted(f["statuses"])) == (["code", "math"], [0, 2], 9,
                                                                             ["infra_error", "ok"])


def test_counts_by_step(run):
    with _q(run) as q:
        assert q.counts_by_step() == {0: 3, 1: 3, 2: 3}


def test_reward_moments_leave_out_infra_errors_and_pool_all(run):
    with _q(run) as q:
        m = {(x.step, x.domain): x for x in q.reward_moments()}
    assert (m[(1, "code")].n, m[(1, "ALL")].n, m[(2, "ALL")].mean) == (2, 2, pytest.approx(1 / 3))


def test_reward_range_spans_the_scored_rewards(run):
    with _q(run) as q:
        assert q.reward_range() == (0.0, 1.0)


def test_scored_samples_start_at_min_step_and_skip_infra_errors(run):
    with _q(run) as q:
        rows = q.scored_samples(min_step=1)
    assert sorted((r.step, r.grp, r.completion) for r in rows) == [(1, 0, "ans0"), (1, 0, "ans1ans1"), (2, 0, "ans0"),
                                                                   (2, 0, "ans1ans1"), (2, 0, "ans2ans2ans2")]


def test_status_rows_carry_the_verifier_rule_and_boundary(run):
    with _q(run) as q:
        rows = [r for r in q.status_rows(min_step=1) if r.step == 1]
    assert sorted(((r.status, r.boundary, r.rule) for r in rows), key=str) == [
        ("infra_error", "sandbox", None), ("ok", None, "format"), ("ok", None, None)]


def test_trajectories_rebuild_trajectory_objects_by_step_and_task(run):
    with _q(run) as q:
        ts = list(q.trajectories(task_id="t2"))
    assert [(t.step, t.sample, t.completion_text, t.reward) for t in ts] == [
        (2, 0, "ans0", 1.0), (2, 1, "ans1ans1", 0.0), (2, 2, "ans2ans2ans2", 0.0)]


def test_stamp_changes_when_the_trainer_writes(run):
    with _q(run) as q:
        before = q.stamp()
        store = run.store()
        store.put_many([_t(3, 0, 0, 1.0)])
        store.close()
        assert q.stamp() != before
