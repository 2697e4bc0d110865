"""What a completion cut off by the token budget scores: `rl.overlong: {name, args}`.

    policy = make_overlong(cfg)                     # from rl.overlong and rl.max_new_tokens
    policy.gates(task)                              # True: a truncated answer fails the format rule
    policy.penalty(task, traj)                      # <= 0, added to the reward (never to pass@1)

Built-ins (registry kind `overlong`):
- `gate` (the default): a completion that hit the budget fails the format rule and scores 0
  without calling the verifier, in training and in eval. The policy learns to stop.
- `score`: the truncated completion is verified as is, like any other (TRL's GRPOTrainer,
  verl without an overlong buffer).
- `soft_penalty(cache, factor=1.0)`: scored as is, plus DAPO's soft overlong punishment (Yu et
  al. 2025, eq. 13): with budget L = rl.max_new_tokens and |y| the completion's tokens,
  0 for |y| <= L - cache, ((L - cache) - |y|) / cache * factor up to L (so -factor at the
  budget). verl: `reward_model.overlong_buffer.{len, penalty_factor}`.

A task may override the run's choice with `metadata.overlong: gate | score` (a task file
field): e.g. code that is graded by tests even when the model rambled on after it. The
penalty shapes the training reward only; held-out pass@1 reads `verify.passed`, which the
penalty never touches. Multi-step episodes are gated by the agent loop's own rule
(rollout/agent/); a non-gate policy on them is refused (config_check.check_rl_splits).
"""

from __future__ import annotations

from typing import Any, Protocol

from posttrain.errors import ConfigError
from posttrain.registry import registry
from posttrain.types import Task, Trajectory, is_multi_step

TASK_OVERRIDES = ("gate", "score")  # what `metadata.overlong` may name


class OverlongPolicy(Protocol):
    def gates(self, task: Task) -> bool: ...  # a truncated answer fails the format rule

    def penalty(self, task: Task, traj: Trajectory) -> float: ...  # <= 0, added to the reward

    def refusal(self, task: Task) -> str | None: ...  # why this policy cannot apply to `task`, or None


def overlong(name: str):
    return registry("overlong").register(name)


def completion_tokens(traj: Trajectory) -> int:
    """The tokens the model generated (its trainable turns)."""
    return sum(len(x.token_ids) for x in traj.turns if x.trainable)


def _task_choice(task: Task) -> str | None:
    named = task.metadata.get("overlong")
    return named if named in TASK_OVERRIDES else None


@overlong("gate")
class Gate:
    def __init__(self, budget: int = 0) -> None:
        self.budget = budget

    def gates(self, task: Task) -> bool:
        return _task_choice(task) != "score"

    def penalty(self, task: Task, traj: Trajectory) -> float:
        return 0.0

    def refusal(self, task: Task) -> str | None:
        return None

    def task_budget(self, task: Task) -> int:
        """The tokens a one-step answer to `task` may take: rl.max_new_tokens, capped by the task's limit."""
        return min(self.budget, task.limits.max_new_tokens) if self.budget else task.limits.max_new_tokens


@overlong("score")
class Score(Gate):
    def gates(self, task: Task) -> bool:
        return _task_choice(task) == "gate"

    def refusal(self, task: Task) -> str | None:
        if is_multi_step(task):
            return (f"domain {task.domain!r} runs multi-step episodes (task {task.id!r}), which have no per-answer "
                    "token budget to be overlong against")
        return None


@overlong("soft_penalty")
class SoftPenalty(Score):
    def __init__(self, cache: int, factor: float = 1.0, budget: int = 0) -> None:
        super().__init__(budget)
        if not isinstance(cache, int) or cache < 1:
            raise ConfigError(f"rl.overlong.args.cache={cache!r}: the penalty interval must be a whole number of "
                              "tokens >= 1")
        if budget and cache >= budget:
            raise ConfigError(f"rl.overlong.args.cache={cache} must be below the budget rl.max_new_tokens={budget} "
                              "(the penalty starts at max_new_tokens - cache tokens)")
        if factor < 0:
            raise ConfigError(f"rl.overlong.args.factor={factor}: must be >= 0")
        self.cache, self.factor = cache, float(factor)

    def penalty(self, task: Task, traj: Trajectory) -> float:
        if self.gates(task) or is_multi_step(task):
            return 0.0
        over = completion_tokens(traj) - (self.task_budget(task) - self.cache)
        return -self.factor * min(1.0, max(0, over) / self.cache)

    def refusal(self, task: Task) -> str | None:
        budget = self.task_budget(task)
        if not is_multi_step(task) and self.cache >= budget:
            return (f"domain {task.domain!r} answers within {budget} tokens (task {task.id!r}: limits.max_new_tokens="
                    f"{task.limits.max_new_tokens}), not more than rl.overlong.args.cache={self.cache}")
        return super().refusal(task)


def make_overlong(cfg: Any) -> OverlongPolicy:
    """The run's policy (`cfg` a RunConfig): rl.overlong over the budget rl.max_new_tokens; built
    and checked where the config's other checks live (config_check.overlong_policy)."""
    from posttrain.config_check import overlong_policy

    return overlong_policy(cfg)
