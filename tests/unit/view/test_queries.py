"""The viewer's SQL: filters, pages, stored advantages, reward bands."""

from __future__ import annotations

import sqlite3

import pytest
import torch

from posttrain.store.trajectories import TrajectoryStore
from posttrain.train.advantages import estimate_advantages, trained_advantages
from posttrain.train.rl import group_by_task
from posttrain.types import Trajectory, Turn, VerifyResult
from posttrain.eval.run_data import reward_by_step
from posttrain.view.queries import Filters, facets, group_samples, list_trajectories, trajectory
from posttrain.view.runs import RunView
from posttrain.testing.synthetic_runs import write_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return RunView(write_run(tmp_path_factory.mktemp("q") / "run", steps=6, groups=4, group_size=6, seed=3))


def _traj(step: int, grp: int, sample: int, reward: float, infra: bool = False) -> Trajectory:
    v = VerifyResult.infra("down") if infra else VerifyResult(reward, reward > 0.5)
    return Trajectory("t", "v", "d", (1,), (Turn("assistant", "x", (1,), (-0.1,)),), reward=reward, verify=v,
                      step=step, group=grp, sample=sample)


@pytest.fixture()
def odd_groups(tmp_path):
    """Two groups, one with an infra error, stored with the reinforce_pp advantages the trainer used."""
    trajs = [_traj(0, 0, i, r, infra=(i == 2)) for i, r in enumerate([1.0, 0.0, 0.0, 0.5, 1.0])]
    trajs += [_traj(0, 1, i, r) for i, r in enumerate([1.0, 1.0, 1.0, 0.0])]
    groups = group_by_task(trajs)
    adv = trained_advantages(trajs, [t for g in groups for t in g], estimate_advantages(groups, "reinforce_pp"))
    store = TrajectoryStore(tmp_path / "trajectories.sqlite")
    store.put_many(trajs, advantages=adv)
    store.close()
    return RunView(tmp_path), adv


def test_page_shows_the_stored_advantage_of_any_estimator(odd_groups):
    run, adv = odd_groups  # reinforce_pp: the viewer once showed group_norm for it
    with run.db() as db:
        got = [r["advantage"] for r in list_trajectories(db, Filters())["rows"]]
    assert got == adv and got[2] is None  # the infra error was not trained on


def test_group_and_single_trajectory_show_the_stored_advantage(odd_groups):
    run, adv = odd_groups
    with run.db() as db:
        assert [s["advantage"] for s in group_samples(db, "train", 0, 1)["samples"]] == adv[5:]
        assert trajectory(db, "train", 0, 0, 3)["advantage"] == adv[3]


def test_advantage_filter_reads_the_stored_column(odd_groups):
    run, adv = odd_groups
    with run.db() as db:
        rows = list_trajectories(db, Filters(adv_min=0.0))["rows"]
    assert [r["advantage"] for r in rows] == [a for a in adv if a is not None and a >= 0.0]


def test_a_store_from_before_the_column_shows_no_advantage(tmp_path):
    db = sqlite3.connect(tmp_path / "trajectories.sqlite")
    db.execute("CREATE TABLE trajectories (kind TEXT, step INTEGER, grp INTEGER, sample INTEGER, task_id TEXT, "
               "task_version TEXT, domain TEXT, reward REAL, passed INTEGER, status TEXT, weights_version INTEGER, "
               "finish_reason TEXT, error_boundary TEXT, data TEXT)")
    db.execute("INSERT INTO trajectories VALUES ('train',0,0,0,'t','v','d',1.0,1,'ok',0,'stop',NULL,?)",
               ('{"turns": []}',))
    db.commit()
    rows = list_trajectories(db, Filters())["rows"]
    assert len(rows) == 1 and rows[0]["advantage"] is None


def test_an_older_store_gains_the_column_when_the_trainer_opens_it(tmp_path):
    db = sqlite3.connect(tmp_path / "t.sqlite")
    db.execute("CREATE TABLE trajectories (kind TEXT NOT NULL DEFAULT 'train', step INTEGER NOT NULL, grp INTEGER NOT NULL, "
               "sample INTEGER NOT NULL, task_id TEXT NOT NULL, task_version TEXT NOT NULL, domain TEXT NOT NULL, "
               "reward REAL, passed INTEGER, status TEXT, weights_version INTEGER, finish_reason TEXT, "
               "error_boundary TEXT, data TEXT NOT NULL, PRIMARY KEY (kind, step, grp, sample))")
    db.close()
    store = TrajectoryStore(tmp_path / "t.sqlite")
    store.put_many([_traj(1, 0, 0, 1.0)], advantages=[0.25])
    assert store.advantages(1) == {(0, 0): 0.25}
    store.close()


def test_advantage_filter_keeps_only_rows_in_range(run):
    with run.db() as db:
        rows = list_trajectories(db, Filters(adv_min=0.5), limit=500)["rows"]
    assert rows and all(r["advantage"] >= 0.5 for r in rows)


def test_domain_and_reward_filters_combine(run):
    with run.db() as db:
        page = list_trajectories(db, Filters(domain="code", reward_min=0.5), limit=500)
    assert page["total"] == len(page["rows"]) > 0
    assert all(r["domain"] == "code" and r["reward"] >= 0.5 for r in page["rows"])


def test_pages_cover_every_row_once(run):
    with run.db() as db:
        total = list_trajectories(db, Filters(), limit=1)["total"]
        keys = [(r["step"], r["grp"], r["sample"]) for off in range(0, total, 50)
                for r in list_trajectories(db, Filters(), offset=off, limit=50)["rows"]]
    assert len(keys) == len(set(keys)) == total == 6 * 4 * 6


def test_step_and_version_filters(run):
    with run.db() as db:
        rows = list_trajectories(db, Filters(step_min=2, step_max=3, version=3), limit=500)["rows"]
    assert rows and {r["step"] for r in rows} == {3}


def test_group_holds_its_samples_in_order_with_completions(run):
    with run.db() as db:
        g = group_samples(db, "train", 1, 2)
    assert [s["sample"] for s in g["samples"]] == list(range(6))
    assert all(isinstance(s["completion"], str) for s in g["samples"])


def test_reward_band_contains_the_mean_and_pools_all(run):
    with run.db() as db:
        curves = reward_by_step(db)
    assert set(curves) == {"arithmetic", "code", "ALL"}
    c = curves["ALL"]
    assert all(lo <= m <= hi for lo, m, hi in zip(c["low"], c["mean"], c["high"]))
    assert sum(c["n"]) == 6 * 4 * 6


def test_facets_list_domains_and_ranges(run):
    with run.db() as db:
        f = facets(db)
    assert f["domains"] == ["arithmetic", "code"] and f["steps"] == [0, 5] and f["count"] == 144


def test_filters_from_query_parse_types_and_skip_blanks():
    f = Filters.from_query({"step_min": "3", "reward_min": "0.5", "domain": "code", "adv_max": ""})
    assert (f.step_min, f.reward_min, f.domain, f.adv_max) == (3, 0.5, "code", None)


def test_filters_from_query_rejects_a_non_number():
    with pytest.raises(ValueError):
        Filters.from_query({"step_min": "three"})


def test_group_norm_reference_is_unbiased():
    # the reference the viewer matches: torch's unbiased std over the scored samples
    r = torch.tensor([[1.0, 0.0, 0.5, 1.0]])
    assert estimate_advantages([[_traj(0, 0, i, float(x)) for i, x in enumerate(r[0])]], "group_norm")[0] == \
        pytest.approx(float((1.0 - r.mean()) / (r.std() + 1e-6)), abs=1e-5)


def test_reward_band_stays_inside_the_rewards_range(run):
    with run.db() as db:
        curves = reward_by_step(db)
    assert all(0.0 <= lo and hi <= 1.0 for c in curves.values() for lo, hi in zip(c["low"], c["high"]))
