"""Export any verifier as a TRL reward function: `reward_func(completions, **kwargs) -> list[float]`.

Two ways to say which task each completion answers:

    # 1. the dataset carries our tasks (a `task` column of task dicts, see `tasks_to_trl_rows`):
    reward = trl_reward_func()
    # 2. a verifier name plus dataset columns mapped to its arguments:
    reward = trl_reward_func("math_answer", columns={"answer": "answer"}, rel_tol=1e-4)
    GRPOTrainer(..., reward_funcs=[reward])

Completions may be strings or chat lists (`[{"role": "assistant", "content": ...}]`, the
last assistant message counts). A sample whose verifier hit an infrastructure error gets
`None` (TRL ignores it) rather than a score of 0. Sandbox verifiers use
`default_sandbox()` unless one is passed. Runs its own event loop in a worker thread
when called from inside a running loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Callable, Mapping, Sequence

from posttrain.types import Message, Spec, Task, Trajectory, Turn
from posttrain.verifiers.base import VerifyContext


def _text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        msgs = [m for m in completion if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant"]
        return str(msgs[-1].get("content", "")) if msgs else ""
    return str(completion)


def _run(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from async code: don't nest loops
        return pool.submit(asyncio.run, coro).result()


def check_reward_spec(base: Spec | None, columns: Mapping[str, str]) -> None:
    """The verifier exists and accepts the static arguments plus the column-fed ones (ConfigError)."""
    import inspect

    from posttrain.errors import ConfigError
    from posttrain.registry import registry

    bad = [k for k, v in columns.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        raise ConfigError(f"trl_reward_func: columns must map verifier argument names to column names, got {bad!r}")
    if base is None:
        if columns:
            raise ConfigError("trl_reward_func: columns need a verifier name (without one, each row's task column "
                              "names its own verifier)")
        return
    factory = registry("verifier").get(base.name)  # ConfigError naming the known verifiers
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    given = set(dict(base.args)) | set(columns)
    unknown = sorted(given - set(params))
    missing = sorted(n for n, p in params.items() if p.default is inspect.Parameter.empty
                     and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in given)
    if unknown or missing:
        raise ConfigError(f"trl_reward_func: verifier {base.name!r} takes ({', '.join(params)}); "
                          + (f"unknown argument(s) {unknown}" if unknown else "")
                          + ("; " if unknown and missing else "") + (f"missing {missing}" if missing else "")
                          + " (static keyword arguments or columns={arg: column})")


def trl_reward_func(verifier: str | Spec | None = None, columns: Mapping[str, str] | None = None, sandbox: Any = None,
                    task_column: str = "task", **static_args: Any) -> Callable[..., list[float | None]]:
    """A TRL-compatible reward function scoring with our verifiers (see module doc)."""
    from posttrain.tasks.io import task_from_dict
    from posttrain.verifiers.compose import build_verifier

    columns = dict(columns or {})
    base = Spec(verifier, static_args) if isinstance(verifier, str) else verifier
    check_reward_spec(base, columns)  # a bad name or argument fails here, not at the first call

    def task_for(i: int, kwargs: Mapping[str, Any]) -> Task:
        if base is None:
            if task_column not in kwargs:
                raise KeyError(f"reward_func: no {task_column!r} column; pass a verifier name or export tasks with tasks_to_trl_rows")
            return task_from_dict(kwargs[task_column][i])
        args = {**dict(base.args), **{arg: kwargs[col][i] for arg, col in columns.items()}}
        return Task(id=f"trl-{i}", domain="trl", prompt=(Message("user", ""),), verifier=Spec(base.name, args))

    async def score_all(completions: Sequence[Any], kwargs: Mapping[str, Any]) -> list[float | None]:
        ctx = VerifyContext(sandbox=sandbox)
        if ctx.sandbox is None:
            from posttrain.sandbox import default_sandbox

            ctx.sandbox = default_sandbox()

        async def one(i: int, c: Any) -> float | None:
            task = task_for(i, kwargs)
            traj = Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", _text(c)),))
            r = await build_verifier(task.verifier)(task, traj, ctx)
            return None if r.status == "infra_error" else r.score

        return list(await asyncio.gather(*(one(i, c) for i, c in enumerate(completions))))

    def reward_func(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return _run(score_all(completions, kwargs))

    reward_func.__name__ = f"posttrain_{base.name if base else 'task'}"
    return reward_func


def tasks_to_trl_rows(tasks: Sequence[Task]) -> list[dict[str, Any]]:
    """Dataset rows for TRL: a chat `prompt` plus the full `task` for `trl_reward_func()`."""
    from posttrain.tasks.io import task_to_dict

    return [{"prompt": [{"role": m.role, "content": m.content} for m in t.prompt], "task": task_to_dict(t)} for t in tasks]
