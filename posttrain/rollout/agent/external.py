"""RL on an agent written against the OpenAI API: one agent process per episode, behind a proxy.

    trajs = await rollout_external(engine, tok, tasks, AgentOptions(n=4), ExternalAgent("python my_agent.py"),
                                   proxy=ServedProxy)   # serve/proxy_host.py, handed in by the caller

The engine is served in-process for the duration of the rollout, by the proxy the caller hands in
(`AgentProxyFactory`; the recipes pass serve/proxy_host.py's `ServedProxy`, uvicorn on a free loopback
port: rollout/ sits below serve/ and never imports it). Each episode gets its own proxy URL and one agent process:

- environment: `PATH` with this interpreter's directory first (so `python` is the run's),
  `OPENAI_BASE_URL` = `http://127.0.0.1:PORT/episodes/EP/v1`,
  `OPENAI_API_KEY` (any value works), `POSTTRAIN_MODEL` (the model id to request),
  `POSTTRAIN_TOOLS_URL` (`POST {url}/{tool}` with the arguments object runs the task's tool
  in its own state and sandbox session: `{"output", "status"}`) and `POSTTRAIN_TASK`;
- stdin: the same task JSON, `{"id", "domain", "messages", "tools", "max_steps",
  "max_new_tokens"}` (messages and tools in OpenAI's shapes), then EOF.

The proxy (serve/capture.py) records every model call with exact ids, logprobs and
weights version, and forces the run's sampling (temperature, top_p, seed; max_tokens
capped at the task's per-step limit) whatever the agent asks for, so samples stay on
policy. When the process exits the calls become one multi-turn trajectory (assistant
turns trainable; the ids between turns, tool output and chat framing, masked), scored by
the task's verifier on that trajectory (and on the session, still open, for terminal
tasks). What the agent prints is logged, never scored: only what the model generated is.

Failures are data: a timeout (process group killed), a spent step budget, a non-zero exit
or a kill, an agent that never called the model: each is a finish reason and a failed
verdict on its trajectory; a dead sandbox is an infra error. None of them stops the run.

Limits: one reply per call (n = 1); an agent that rewrites its history mid-episode keeps
only the calls before the rewrite in its trajectory (`details["proxy"]["rerendered"]`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from posttrain.rollout.agent.loop import AgentOptions, run_episodes
from posttrain.types import Task, Trajectory, TrajError, Turn, VerifyResult


class AgentProxy(Protocol):
    """The token-capturing proxy a rollout serves its engine through (serve/proxy_host.py)."""

    model_name: str
    episodes: Any  # serve/capture.py EpisodeRegistry: open(task, state, max_calls, prefix), close(id), open_

    async def start(self) -> str: ...  # the base URL, e.g. http://127.0.0.1:PORT

    async def stop(self) -> None: ...


class AgentProxyFactory(Protocol):
    """Builds the proxy for one rollout: `lanes` episodes in flight at once (serve/proxy_host.py ServedProxy)."""

    def __call__(self, engine: Any, tok: Any, lanes: int) -> AgentProxy: ...


@dataclass(frozen=True)
class ExternalAgent:
    command: str | None = None  # shell command, e.g. "python my_agent.py"
    entry: str | None = None  # or "package.module:function", called with no arguments in a fresh python
    timeout_s: float = 0.0  # per episode; 0 -> the task's limits.timeout_s
    max_calls: int = 0  # model calls per episode; 0 -> the task's limits.max_steps
    env: dict[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        if self.entry:
            mod, _, fn = self.entry.partition(":")
            return [sys.executable, "-c", f"import importlib; importlib.import_module({mod!r}).{fn or 'main'}()"]
        return ["/bin/sh", "-c", self.command or "false"]


def task_payload(task: Task, max_steps: int) -> dict[str, Any]:
    from posttrain.rollout.agent.tools import tools_for_task

    return {"id": task.id, "domain": task.domain, "messages": [{"role": m.role, "content": m.content}
                                                               for m in task.prompt],
            "tools": [t.openai_schema() for t in tools_for_task(task).values()], "max_steps": max_steps,
            "max_new_tokens": task.limits.max_new_tokens}


async def run_agent(spec: ExternalAgent, env: dict[str, str], stdin: bytes, timeout_s: float) -> dict[str, Any]:
    """Run the agent process; {"status": exited|timeout|spawn_error, "code", "stdout", "stderr"} (tails)."""
    try:
        proc = await asyncio.create_subprocess_exec(*spec.argv(), env=env, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                    start_new_session=True)
    except OSError as e:
        return {"status": "spawn_error", "code": None, "stdout": "", "stderr": f"{type(e).__name__}: {e}"}
    status = "exited"
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout_s)
    except asyncio.TimeoutError:
        status = "timeout"
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: an agent's own children die too
        except ProcessLookupError:
            pass
        out, err = await proc.communicate()
    return {"status": status, "code": proc.returncode, "stdout": out.decode(errors="replace")[-2000:],
            "stderr": err.decode(errors="replace")[-2000:]}


class ExternalRunner:
    def __init__(self, engine: Any, tok: Any, opts: AgentOptions, spec: ExternalAgent, proxy: AgentProxyFactory,
                 sandbox: Any = None, verifier_runner: Any = None, step: int = 0) -> None:
        from posttrain.verifiers.run import VerifierRunner

        self.engine, self.tok, self.opts, self.spec, self.sandbox, self.step = engine, tok, opts, spec, sandbox, step
        self.proxy = proxy
        self.verifiers = verifier_runner or VerifierRunner(sandbox)

    async def run(self, tasks: Sequence[Task]) -> list[Trajectory]:
        # Lanes for the episodes that can be in flight at once, 2k tokens each to start (longer ones grow them).
        self.serve: AgentProxy = self.proxy(self.engine, self.tok, lanes=self.opts.concurrency)
        try:
            self.url = await self.serve.start()
            return await run_episodes(self.episode, tasks, self.opts)
        finally:
            await self.serve.stop()

    async def episode(self, task: Task, g: int, k: int, attempt: int = 0) -> Trajectory:
        from posttrain.rollout.agent.tools import needs_session
        from posttrain.tasks.tools_impl import init_state

        t0 = time.perf_counter()
        max_steps = self.spec.max_calls or self.opts.max_steps or task.limits.max_steps
        timeout = self.spec.timeout_s or self.opts.time_budget_s or task.limits.timeout_s
        state = init_state(task)
        state["deadline"] = time.monotonic() + timeout
        ep = self.serve.episodes.open(task, state, max_steps, prefix=f"s{self.step}-g{g}-k{k}-a{attempt}")
        seed = None if self.opts.seed is None else self.opts.seed * 1_000_003 + g * 1009 + k * 7 + attempt
        ep.override = {"temperature": self.opts.temperature, "top_p": self.opts.top_p, "seed": seed,
                       "max_tokens_cap": self.opts.max_new_tokens or task.limits.max_new_tokens}
        session, run = None, {}
        try:
            if needs_session(task) and self.sandbox is not None:
                from posttrain.tasks.terminal import open_task_session

                async with open_task_session(self.sandbox, task) as session:
                    state.update(session=session, sandbox=self.sandbox)
                    run = await self._run(ep, task, max_steps, timeout)
                    traj = await self._score(ep, task, g, k, run, max_steps, session, t0)
            else:
                run = await self._run(ep, task, max_steps, timeout)
                traj = await self._score(ep, task, g, k, run, max_steps, None, t0)
        except Exception as e:  # noqa: BLE001  the session could not start: not the model's fault
            traj = self._trajectory(ep, task, g, k, "error", TrajError("sandbox", f"{type(e).__name__}: {e}"), t0)
            traj = dataclasses.replace(traj, verify=VerifyResult.infra(traj.error.message, boundary="sandbox"))
        finally:
            if ep.id in self.serve.episodes.open_:
                self.serve.episodes.close(ep.id)
        return traj

    async def _run(self, ep: Any, task: Task, max_steps: int, timeout: float) -> dict[str, Any]:
        payload = json.dumps(task_payload(task, max_steps))
        base = f"{self.url}/episodes/{ep.id}"
        path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])  # `python` = ours
        env = {**os.environ, "PATH": path, **self.spec.env, "OPENAI_BASE_URL": f"{base}/v1",
               "OPENAI_API_KEY": "posttrain-episode",
               "POSTTRAIN_MODEL": self.serve.model_name, "POSTTRAIN_TOOLS_URL": f"{base}/tools",
               "POSTTRAIN_TASK": payload}
        return await run_agent(self.spec, env, payload.encode(), timeout)

    def _finish(self, ep: Any, run: dict[str, Any], turns: Sequence[Turn]) -> str:
        if run["status"] == "timeout":
            return "time_budget"
        if ep.budget_hit:
            return "max_steps"
        if run["status"] != "exited" or run["code"] != 0:
            return "agent_error"
        last = turns[-1] if turns else None
        if last is not None and last.tool_call is not None and last.tool_call.name == "submit":
            return "submit"
        return "answer"

    async def _score(self, ep: Any, task: Task, g: int, k: int, run: dict[str, Any], max_steps: int, session: Any,
                     t0: float) -> Trajectory:
        from posttrain.rollout.agent.external_traj import build_turns, verify_episode

        turns, chain = build_turns(self.tok, task, ep)
        finish = self._finish(ep, run, turns)
        traj = self._trajectory(ep, task, g, k, finish, None, t0, turns)
        proxy = {"calls": len(ep.calls), "chained": chain, "rerendered": chain < len(ep.calls),
                 "versions": [c.weights_version for c in ep.calls], "agent": {k2: run.get(k2) for k2 in
                                                                             ("status", "code", "stderr")}}
        if ep.sandbox_error:
            err = TrajError("sandbox", ep.sandbox_error)
            return dataclasses.replace(traj, error=err, verify=VerifyResult.infra(ep.sandbox_error, boundary="sandbox"))
        if finish == "agent_error":
            res = VerifyResult.fail(f"agent process failed: {run['status']} exit code {run['code']}", proxy=proxy)
        elif not turns:
            res = VerifyResult.fail("the agent made no model calls", proxy=proxy)
        else:
            res = await verify_episode(self.verifiers, task, traj, max_steps, self.sandbox, session,
                                       self.opts.verify_timeout_s)
        steps = traj.num_steps
        bonus = self.opts.step_weight * max(0.0, 1.0 - steps / max(1, max_steps)) if res.passed else 0.0
        res = VerifyResult(res.score, res.passed, {**res.details, "proxy": proxy,
                                                   "agent": {"steps": steps, "finish": finish, "step_bonus": bonus}},
                           res.status, res.reason)
        if res.status == "infra_error":
            return dataclasses.replace(traj, verify=res, reward=0.0, error=TrajError("verifier", res.reason))
        return dataclasses.replace(traj, verify=res, reward=res.score + bonus)

    def _trajectory(self, ep: Any, task: Task, g: int, k: int, finish: str, error: TrajError | None, t0: float,
                    turns: Sequence[Turn] = ()) -> Trajectory:
        prompt = ep.calls[0].prompt_ids if ep.calls else ()
        version = ep.calls[0].weights_version if ep.calls else self.engine.weights_version
        timings = {"total_s": time.perf_counter() - t0, "generate_s": sum(c.wall_s for c in ep.calls)}
        return Trajectory(task_id=task.id, task_version=task.version, domain=task.domain, prompt_ids=tuple(prompt),
                          turns=tuple(turns), weights_version=version, step=self.step, group=g, sample=k,
                          finish_reason=finish, timings=timings, error=error)


async def rollout_external(engine: Any, tokenizer: Any, tasks: Sequence[Task], opts: AgentOptions,
                           spec: ExternalAgent, proxy: AgentProxyFactory, sandbox: Any = None,
                           verifier_runner: Any = None, step: int = 0) -> list[Trajectory]:
    """`opts.n` episodes per task through the agent process served by `proxy`; trajs[g * n + k], as rollout_agent."""
    return await ExternalRunner(engine, tokenizer, opts, spec, proxy, sandbox, verifier_runner, step).run(tasks)
