"""The scheduler's page of the run report: `scheduler.png` from a run's metrics.jsonl rows.

    plot_scheduler(run_dir, metrics.read())

Up to five panels over RL steps, each drawn only when it teaches something:
- sampling weight by domain (dashed: difficulty buckets), only when some weight moves (under
  the `uniform` policy every weight is a flat line, so the panel is left out); with more than 12
  domains, their shares alone, the 12 largest named and the rest faint;
- observed pass rate by domain, only when it differs from the reward curve of
  reward_curve.png (with binary rewards and no format bonus it is the same series); with more than
  12 domains, the 12 that moved most named and smoothed, the rest faint;
- dropped (zero-variance) groups;
- difficulty level per domain, when a curriculum ran (`sched/difficulty/<domain>`; with more than
  12 domains the lines are faint and unlabelled, with their mean in bold);
- queue waits and staleness, when the long-tail lanes ran.
Noisy per-step series are EMA-smoothed (weight 0.6) over the faint raw line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from posttrain.store.metric_pages import ema, metric_keys, panel_grid, save_panels, series, varies
from posttrain.store.run import RunDir

SMOOTH = 0.6
MAX_LEGEND = 12  # domains named in the difficulty panel's legend; more are drawn faint, with their mean


def _same_as_reward(rows: Sequence[dict], domain: str) -> bool:
    pairs = [(r[f"sched/pass_rate/{domain}"], r[f"reward/{domain}"]) for r in rows
             if r.get(f"sched/pass_rate/{domain}") is not None and r.get(f"reward/{domain}") is not None]
    return bool(pairs) and all(abs(a - b) < 1e-6 for a, b in pairs)


def _plot_smoothed(ax, xs, ys, label, **kw):
    line, = ax.plot(xs, ema(ys, SMOOTH), lw=1.3, label=label, **kw)
    ax.plot(xs, ys, lw=0.6, alpha=0.25, color=line.get_color())


def _plot_levels(ax, rows: Sequence[dict], keys: list[str], has_mean: bool) -> None:
    """One step line per domain; past MAX_LEGEND domains they go unlabelled and faint, the mean bold."""
    many = len(keys) > MAX_LEGEND
    for k in keys:
        xs, ys = series(rows, k)
        ax.step(xs, ys, where="post", lw=0.7 if many else 1.2, alpha=0.3 if many else 1.0,
                label="_nolegend_" if many else k.removeprefix("sched/difficulty/"))
    if many and has_mean:
        ax.plot(*series(rows, "sched/difficulty_mean"), lw=2.0, color="black", label="mean over domains")


def _named_colour(j: int):
    """The j-th of up to MAX_LEGEND named lines: the default cycle repeats after 10; tab20's dark shades first."""
    import matplotlib

    return matplotlib.colormaps["tab20"](2 * j % 20 + 2 * j // 20)


def _plot_many_weights(ax, rows: Sequence[dict], keys: list[str]) -> None:
    """Domain shares only (buckets left out); the MAX_LEGEND domains with the largest peak share are
    named, the rest drawn faint grey: with a hundred domains a legend of all would hide the plot."""
    peak = {k: max(series(rows, k)[1]) for k in keys}
    named = sorted(sorted(keys, key=lambda k: -peak[k])[:MAX_LEGEND])
    for k in keys:
        if k not in named:  # first, under the named ones
            ax.plot(*series(rows, k), lw=0.6, alpha=0.3, color="grey", label="_nolegend_")
    for j, k in enumerate(named):
        ax.plot(*series(rows, k), lw=1.3, color=_named_colour(j), label=k.removeprefix("sched/weight/"))


def _plot_many_rates(ax, rows: Sequence[dict], keys: list[str]) -> None:
    """Pass rates of more than MAX_LEGEND domains: the MAX_LEGEND that moved most (max - min) named and
    smoothed, the rest a faint grey raw line (a hundred smoothed lines with their raw shadows are a wash,
    and most sit at 0 throughout)."""
    spread = {k: max(ys) - min(ys) for k in keys for ys in [series(rows, k)[1]]}
    named = sorted(sorted(keys, key=lambda k: (-spread[k], k))[:MAX_LEGEND])
    for k in keys:
        if k not in named:  # first, under the named ones
            ax.plot(*series(rows, k), lw=0.6, alpha=0.25, color="grey", label="_nolegend_")
    for j, k in enumerate(named):
        _plot_smoothed(ax, *series(rows, k), k.removeprefix("sched/pass_rate/"), color=_named_colour(j))


def plot_scheduler(run_dir: str | Path, rows: Sequence[dict]) -> Path | None:
    """Write run_dir/scheduler.png; None when the rows carry no scheduler metrics worth a panel."""
    keys = metric_keys(rows)
    if not any(k.startswith("sched/") for k in keys):
        return None
    panels = []  # (title, draw(ax))
    weights = [k for k in keys if k.startswith("sched/weight/") and varies(series(rows, k)[1])]
    domain_weights = [k for k in weights if "/bucket" not in k]
    if len(domain_weights) > MAX_LEGEND:
        panels.append((f"share of draws by domain (the {MAX_LEGEND} largest named; faint: "
                       f"{len(domain_weights) - MAX_LEGEND} more)", lambda ax: _plot_many_weights(ax, rows, domain_weights)))
    elif weights:
        panels.append(("sampling weight by domain (dashed: difficulty buckets)", lambda ax: [
            ax.plot(*series(rows, k), lw=1, ls="--" if "/bucket" in k else "-", label=k.removeprefix("sched/weight/"))
            for k in weights]))
    rates = [k for k in keys if k.startswith("sched/pass_rate/") and not _same_as_reward(rows, k.rsplit("/", 1)[1])]
    if len(rates) > MAX_LEGEND:
        panels.append((f"observed pass rate by domain (EMA {SMOOTH}; the {MAX_LEGEND} that moved most named; "
                       f"faint: {len(rates) - MAX_LEGEND} more)", lambda ax: _plot_many_rates(ax, rows, rates)))
    elif rates:
        panels.append((f"observed pass rate by domain (EMA {SMOOTH})", lambda ax: [
            _plot_smoothed(ax, *series(rows, k), k.removeprefix("sched/pass_rate/")) for k in rates]))
    drops = [(k, lab) for k, lab in (("sched/dropped_frac", "this step"), ("sched/dropped_frac_total", "cumulative"),
                                    ("sched/zero_weight_frac", "tasks at zero weight")) if k in keys]
    if drops:
        panels.append((f"dropped zero-variance groups (fraction, EMA {SMOOTH})", lambda ax: [
            _plot_smoothed(ax, *series(rows, k), lab) for k, lab in drops]))
    levels = [k for k in keys if k.startswith("sched/difficulty/")]
    if levels:
        panels.append(("curriculum: difficulty level by domain" + (" (bold: mean)" if len(levels) > MAX_LEGEND else ""),
                       lambda ax: _plot_levels(ax, rows, levels, "sched/difficulty_mean" in keys)))
    queue = [k for k in keys if k.startswith(("queue/wait_p50_s/", "queue/staleness_mean"))]
    if queue:
        panels.append(("queue wait p50 (s) and staleness (versions)", lambda ax: [
            ax.plot(*series(rows, k), lw=1, label=k.removeprefix("queue/")) for k in queue]))
    if not panels:
        return None
    plt, fig, axes = panel_grid(len(panels))
    for ax, (_, draw) in zip(axes, panels):
        draw(ax)
    return save_panels(plt, fig, axes, [t for t, _ in panels], RunDir(run_dir).scheduler_page)
