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


def _titles(monkeypatch, rows, tmp_path):
    import posttrain.schedule.plots as sp

    seen = []
    real = sp.save_panels
    monkeypatch.setattr(sp, "save_panels", lambda plt, fig, axes, titles, path: (seen.extend(titles),
                                                                                real(plt, fig, axes, titles, path))[1])
    sp.plot_scheduler(tmp_path, rows)
    return seen


def test_flat_uniform_weights_get_no_panel(monkeypatch, tmp_path):
    rows = [{"step": s, "sched/weight/code": 0.5, "sched/dropped_frac": 0.1 * (s % 3)} for s in range(10)]
    assert not any("sampling weight" in t for t in _titles(monkeypatch, rows, tmp_path))


def test_pass_rate_equal_to_the_reward_curve_is_not_drawn_twice(monkeypatch, tmp_path):
    rows = [{"step": s, "sched/pass_rate/code": s / 10, "reward/code": s / 10, "sched/dropped_frac": 0.2}
            for s in range(10)]
    assert not any("pass rate" in t for t in _titles(monkeypatch, rows, tmp_path))


def test_moving_weights_and_a_distinct_pass_rate_are_drawn(monkeypatch, tmp_path):
    rows = [{"step": s, "sched/weight/code": 0.5 + s / 100, "sched/pass_rate/code": s / 10, "reward/code": s / 20}
            for s in range(10)]
    titles = _titles(monkeypatch, rows, tmp_path)
    assert any("sampling weight" in t for t in titles) and any("pass rate" in t for t in titles)


def test_curriculum_levels_get_a_panel_even_with_a_hundred_domains(monkeypatch, tmp_path):
    rows = [{"step": s, "sched/dropped_frac": 0.1, "sched/difficulty_mean": 1 + s / 10,
             **{f"sched/difficulty/rg-d{i}": 1.0 + (s + i) // 5 % 5 for i in range(100)}} for s in range(10)]
    titles = _titles(monkeypatch, rows, tmp_path)
    assert any(t.startswith("curriculum: difficulty level by domain (bold: mean)") for t in titles)
    assert (tmp_path / "scheduler.png").read_bytes()[:4] == b"\x89PNG"


def test_a_hundred_moving_domain_shares_name_only_the_largest(monkeypatch, tmp_path):
    import matplotlib.pyplot as plt

    rows = [{"step": s, **{f"sched/weight/rg-d{i}": (1 + (i + 1) * s) / 1000 for i in range(100)},
             **{f"sched/weight/rg-d{i}/bucket0": (1 + i * s) / 2000 for i in range(100)}} for s in range(10)]
    legends = []
    real = plt.Axes.legend
    monkeypatch.setattr(plt.Axes, "legend", lambda ax, *a, **k: (legends.append(
        [t for t in ax.get_legend_handles_labels()[1]]), real(ax, *a, **k))[1])
    titles = _titles(monkeypatch, rows, tmp_path)
    assert any(t.startswith("share of draws by domain (the 12 largest named; faint: 88 more)") for t in titles)
    assert sorted(legends[0]) == sorted(f"rg-d{i}" for i in range(88, 100))  # the largest peaks, no buckets


def test_a_hundred_domains_pass_rates_name_only_those_that_moved_most(monkeypatch, tmp_path):
    import matplotlib.pyplot as plt

    rows = [{"step": s, **{f"sched/pass_rate/rg-d{i}": min(1.0, i * s / 900) for i in range(100)},
             **{f"reward/rg-d{i}": 0.5 for i in range(100)}} for s in range(10)]  # not the reward curve
    legends = []
    real = plt.Axes.legend
    monkeypatch.setattr(plt.Axes, "legend", lambda ax, *a, **k: (legends.append(
        [t for t in ax.get_legend_handles_labels()[1]]), real(ax, *a, **k))[1])
    titles = _titles(monkeypatch, rows, tmp_path)
    assert any("the 12 that moved most named; faint: 88 more" in t for t in titles)
    assert sorted(legends[0]) == sorted(f"rg-d{i}" for i in range(88, 100))  # the widest ranges
