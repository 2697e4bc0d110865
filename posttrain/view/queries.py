"""The viewer's reads of a run's trajectory store, in the names its routes use; the SQL is
posttrain/store/run_queries.py (RunQueries), the reward curves posttrain/eval/run_data.py.

    page = list_trajectories(db, Filters(domain="code", reward_min=0.5), offset=0, limit=50)
    group = group_samples(db, "train", 3, 1)     # a prompt's G samples with their advantages
    one = trajectory(db, "train", 3, 1, 0)       # kind, step, group, sample

`db` is what RunView.db() yields (a RunQueries). The advantage shown is the one the trainer
used, stored with the sample; None where the update used none and in runs written before
the column existed. Nothing here re-derives it.
"""

from __future__ import annotations

from typing import Any

from posttrain.store.run_queries import Filters, as_queries

__all__ = ["Filters", "facets", "group_samples", "list_trajectories", "trajectory"]


def list_trajectories(db: Any, f: Filters, offset: int = 0, limit: int = 50) -> dict[str, Any]:
    """{"total": N, "rows": [...]} of one page, ordered by step, group, sample, with previews."""
    return as_queries(db).page(f, offset, limit)


def trajectory(db: Any, kind: str, step: int, grp: int, sample: int) -> dict[str, Any] | None:
    """The whole stored trajectory plus the advantage it was trained with; None if absent."""
    return as_queries(db).trajectory(kind, step, grp, sample)


def group_samples(db: Any, kind: str, step: int, grp: int) -> dict[str, Any]:
    """A prompt's G samples of one step, side by side: summary columns, advantage, completion."""
    return as_queries(db).group(kind, step, grp)


def facets(db: Any, kind: str = "train") -> dict[str, Any]:
    """What the filter controls offer: domains, step and version ranges, statuses, kinds."""
    return as_queries(db).facets(kind)
