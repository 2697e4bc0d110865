"""The scheduler's page of the run report."""

from posttrain.schedule.plots import plot_scheduler


def test_scheduler_plot_is_written_from_metrics_rows(tmp_path):
    rows = [{"step": s, "sched/weight/code": 0.5, "sched/pass_rate/code": s / 10, "sched/dropped_frac": 0.2,
             "queue/wait_p50_s/long": 0.1 * s, "queue/staleness_mean": 1.0} for s in range(10)]
    path = plot_scheduler(tmp_path, rows)
    assert path == tmp_path / "scheduler.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_scheduler_metrics_means_no_plot(tmp_path):
    assert plot_scheduler(tmp_path, [{"step": 0, "reward/mean": 0.5}]) is None
    assert not (tmp_path / "scheduler.png").exists()
