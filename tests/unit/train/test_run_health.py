"""run_health: a run that cannot learn says so, and an honest one raises nothing."""

from posttrain.train.run_health import learning_warnings


def test_mostly_dropped_groups_are_warned_about():
    rows = [{"groups/dropped_frac": 0.95, "train/loss": 0.1}] * 10
    assert set(learning_warnings(rows)) == {"dropped_groups"}


def test_no_gradient_step_is_warned_about():
    rows = [{"groups/dropped_frac": 0.5}] * 10
    assert set(learning_warnings(rows)) == {"no_update"}


def test_a_learning_run_gets_no_warning():
    rows = [{"groups/dropped_frac": 0.4, "train/loss": 0.2}] * 10
    assert learning_warnings(rows) == {}


def test_only_the_recent_window_counts():
    rows = [{"groups/dropped_frac": 1.0}] * 30 + [{"groups/dropped_frac": 0.2, "train/loss": 0.1}] * 10
    assert learning_warnings(rows) == {}
