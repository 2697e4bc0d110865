"""The evaluation core shared by the in-loop held-out eval (heldout.py) and the suite runner
(runner.py, summary.py): how samples are produced, how one is judged, how a pass rate is pooled.

    scored = await run_scored(engine, tok, tasks, opts, verifier)   # rollout/entry.py: any task kind
    v = verdict(traj)                       # passed / score / infra, the same rule everywhere
    rate, short = mean_pass_at_k(tallies, k)    # tallies: task id -> (judged samples, passes)

Infra-error samples (the engine, the sandbox or the verifier failed, not the model) are
never judged: they are counted apart and excluded from every rate, so an outage cannot look
like a regression. pass@k and pass^k are the mean over tasks of the per-task unbiased
estimators (metrics.py); a task with fewer than k judged samples gives NaN and is left out
of the mean (`short` counts them); the mean is NaN when every task is short.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from posttrain.eval.metrics import nanmean, pass_at_k, pass_hat_k
from posttrain.types import Task, Trajectory

INFRA_BOUNDARIES = ("engine", "sandbox", "verifier")  # a trajectory error at one of these is not the model's


@dataclass(frozen=True)
class Verdict:
    passed: bool  # never True for an infra error
    score: float  # the verifier's score in [0, 1]; 0.0 when infra or unscored
    infra: bool


def verdict(traj: Trajectory) -> Verdict:
    """The judgement of one scored sample, the same for the held-out eval and the suite runner."""
    v = traj.verify
    infra = traj.infra_error or (traj.error is not None and traj.error.boundary in INFRA_BOUNDARIES)
    return Verdict(bool(v and v.passed and not infra), 0.0 if infra or v is None else v.score, infra)


def tallies(samples: Iterable[tuple[str, Verdict]]) -> dict[str, tuple[int, int]]:
    """task id -> (judged samples, passes), infra errors left out."""
    out: dict[str, tuple[int, int]] = {}
    for task_id, v in samples:
        if not v.infra:
            n, c = out.get(task_id, (0, 0))
            out[task_id] = (n + 1, c + v.passed)
    return out


def mean_pass_at_k(by_task: Mapping[str, tuple[int, int]], k: int) -> tuple[float, int]:
    """(mean over tasks of the unbiased pass@k, number of tasks with fewer than k judged samples)."""
    at = [pass_at_k(n, c, k) for n, c in by_task.values()]
    return nanmean(at), sum(math.isnan(x) for x in at)


def mean_pass_hat_k(by_task: Mapping[str, tuple[int, int]], k: int) -> float:
    """Mean over tasks of the unbiased pass^k (all k tries pass: reliability)."""
    return nanmean([pass_hat_k(n, c, k) for n, c in by_task.values()])


def mean_score(verdicts: Sequence[Verdict]) -> float:
    """Mean verifier score over the judged samples (NaN when none was judged)."""
    judged = [v.score for v in verdicts if not v.infra]
    return sum(judged) / len(judged) if judged else float("nan")


async def run_scored(engine: Any, tok: Any, tasks: Sequence[Task], opts: Any, verifier: Any, sandbox: Any = None,
                     on_generated: Callable[[list[Trajectory]], None] | None = None) -> list[Trajectory]:
    """Every evaluation's samples: the rollout entry (one-step and multi-step tasks alike), scored.
    `opts` is a rollout.entry.RolloutOptions; `sandbox` None: the verifier's."""
    from posttrain.rollout.entry import rollout_scored

    return await rollout_scored(engine, tok, tasks, opts, verifier, sandbox=sandbox, on_generated=on_generated)
