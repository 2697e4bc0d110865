"""benchmarks/async_sim.py runs its workers as the RL loop's own queue (LongTailRunner on virtual
time), and that gives the heap model's seconds per step exactly: the simulator and the loop share it."""

import importlib.util
from pathlib import Path

import pytest


def _sim():
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "async_sim.py"
    spec = importlib.util.spec_from_file_location("async_sim", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("workers, k", [(1, 0), (3, 0), (2, 1), (8, 2)])
def test_the_runner_backed_simulation_matches_the_heap_model(workers, k):
    sim = _sim()
    args = (workers, k, 25, [1.0, 2.0, 3.5], 0.4, 4, 0.5)
    assert sim.simulate_queue(*args, seed=3) == pytest.approx(sim.simulate(*args, seed=3), rel=1e-12)


def test_more_staleness_never_makes_a_step_slower_on_the_queue():
    sim = _sim()
    per = [sim.simulate_queue(8, k, 25, [1.0, 2.0, 3.5], 0.4, 8, 0.5, seed=3) for k in (0, 1, 2)]
    assert per[0] >= per[1] >= per[2]
