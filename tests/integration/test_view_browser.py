"""The viewer in a real headless Chromium: load a run, filter, open a group, compare two runs.

Fails on any console error or page exception. Screenshots land in the test's tmp dir.
The 10,000-trajectory run's first-load and filter times are printed (and recorded by
benchmarks/view_bench.py), never asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.testing.view_browser import chromium_missing

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    from posttrain.view.app import create_app
    from posttrain.testing.view_browser import chromium_page
    from posttrain.view.serve import serve_in_thread
    from posttrain.testing.synthetic_runs import write_run

    root = tmp_path_factory.mktemp("view")
    big = write_run(root / "run-10k", steps=40, groups=16, group_size=16, seed=1)  # 10,240 trajectories
    small = write_run(root / "run-b", steps=12, groups=4, group_size=8, seed=2)
    with serve_in_thread(create_app([big, small])) as url, chromium_page() as (page, errors):
        yield {"page": page, "errors": errors, "url": url, "shots": root / "screenshots"}


def _shot(s, name: str) -> None:
    s["shots"].mkdir(exist_ok=True)
    s["page"].screenshot(path=str(s["shots"] / f"{name}.png"), full_page=True)


def test_loads_a_run_with_its_curve_panels(session):
    from posttrain.testing.view_browser import open_viewer

    page = session["page"]
    ms = open_viewer(page, session["url"])
    titles = page.eval_on_selector_all("#charts .ctitle", "els => els.map(e => e.textContent)")
    _shot(session, "curves")
    print(f"\nview first load (10,240 trajectories): {ms:.0f} ms")
    (session["shots"] / "timings.json").write_text(json.dumps({"first_load_ms": ms}))
    assert any(t.startswith("training reward per domain") for t in titles)
    assert {"KL and entropy", "step time by phase", "held-out pass@1 per domain", "share of draws by domain"} <= set(titles)
    assert len(titles) == len(set(titles))  # no duplicated panel
    assert session["errors"] == []


def test_filters_trajectories_by_domain_and_reward(session):
    from posttrain.testing.view_browser import filter_trajectories, open_tab

    page = session["page"]
    open_tab(page, "trajectories")
    ms = filter_trajectories(page, "code", reward_min="0.5")
    print(f"\nview filter (domain + reward over 10,240 trajectories): {ms:.0f} ms")
    domains = page.locator("#traj-table tr.row td:nth-child(5)").all_inner_texts()
    rewards = [float(x) for x in page.locator("#traj-table tr.row td:nth-child(6)").all_inner_texts()]
    _shot(session, "filtered")
    assert domains and set(domains) == {"code"}
    assert min(rewards) >= 0.5
    assert "trajectories match" in page.inner_text("#traj-count")
    assert session["errors"] == []


def test_opens_a_trajectory_and_its_group(session):
    page = session["page"]
    page.click("#traj-table tr.row >> nth=0")
    page.wait_for_selector("#open-group")
    detail = page.inner_text("#detail")
    assert "prompt" in detail and "verifier" in detail and "sandbox" in detail  # code samples carry a tool call
    assert page.locator("#detail .tokens span").count() > 0  # per-token logprob shading
    page.click("#open-group")
    page.wait_for_selector("#group-view .sample")
    _shot(session, "group")
    assert page.locator("#group-view .sample").count() == 16
    assert "advantage" in page.inner_text("#group-view")
    assert session["errors"] == []


def test_shows_the_before_after_table_and_flips_with_prompts(session):
    from posttrain.testing.view_browser import open_tab

    page = session["page"]
    open_tab(page, "eval")
    assert page.locator("#eval-table tr").count() == 4  # header, two domains, ALL
    page.click("#eval details.flip >> nth=0")
    _shot(session, "eval")
    assert "prompt" in page.inner_text("#eval details.flip >> nth=0")
    assert session["errors"] == []


def test_lists_every_detector(session):
    from posttrain.testing.view_browser import open_tab

    page = session["page"]
    open_tab(page, "detectors")
    names = page.locator("#detectors .detector b:first-child").all_inner_texts()
    assert {"reward_vs_heldout", "exploit_signatures", "universal_completion", "status_shift",
            "length_or_format"} <= set(names)
    assert session["errors"] == []


def test_compares_two_runs_side_by_side(session):
    from posttrain.testing.view_browser import open_tab

    page = session["page"]
    open_tab(page, "compare")
    legend = page.inner_text("#compare-charts")
    assert "[run-10k]" in legend and "[run-b]" in legend  # curves overlaid
    page.fill("#same-task [name='task']", "code-3")
    page.click("#same-task button")
    page.wait_for_function("document.querySelectorAll('#same-task-out > div').length === 2")
    _shot(session, "compare")
    assert session["errors"] == []


def test_axis_of_a_flat_line_with_rounding_noise_has_ticks(session):
    # an EMA of a constant series differs from it by an ulp; stepping ticks by a sub-ulp step
    # once spun the page forever
    n = session["page"].evaluate("niceTicks(0.05, 0.05 + Math.pow(2, -56), 5).length")
    assert 3 <= n <= 12
