"""The agent loop: multi-step tool-calling episodes, scored on their final state.

    trajs = await rollout_agent(engine, tokenizer, tasks, AgentOptions(n=8), sandbox=pool)

Each episode (one task, one sample) repeats a step until it stops:

1. generate the next assistant turn (batched across episodes, `gen.py`; the
   `fast` engine reuses the conversation's KV, so only the new observation is prefilled);
2. parse it strictly (`toolcall.py`): a plain reply is the final answer; a malformed call
   becomes an error observation and still counts as a step;
3. execute the call under the tool's timeout (`tools.py`), in the task's sandbox session
   for shell tools;
4. append the observation, truncated to `obs_max_chars` with a marker (mask 0).

It stops on the final answer (`answer`), on `submit`, or on a budget: `max_steps`,
`time_budget` (the task's `timeout_s`) or `token_budget` (the context); the reason is
`Trajectory.finish_reason`. The task's verifier then scores the final state while the
session is still open, and the reward adds the step-efficiency bonus and subtracts the
malformed-call penalty (`AgentOptions`, from the run config's `agent` section).

Failures are data: a failing step keeps its call, its observation and an `ExecResult`
whose `status`/`error` say what went wrong (`parse:<reason>`, `tool: ...`, a timeout);
`verify.details["agent"]["failed_steps"]` lists them. A sandbox that dies makes the
episode an `infra_error` (boundary `sandbox`); it is re-run up to `retries` times and,
if it keeps failing, kept out of the gradient. Sessions are always closed.

Limits: one tool call per step; episodes of one call share one engine, one at a time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

from posttrain.rollout.agent.gen import GenBatcher
from posttrain.rollout.agent.render import ChatCodec, truncate
from posttrain.rollout.engine import EngineInfo, GenRequest, SamplingParams
from posttrain.rollout.agent.toolcall import ToolCallError, parse_tool_call
from posttrain.rollout.agent.tools import SandboxDown, Tool, execute, needs_session, tools_for_task
from posttrain.types import ExecResult, Task, Trajectory, TrajError, Turn, VerifyResult


@dataclass(frozen=True)
class AgentOptions:
    n: int = 1  # episodes per task (a GRPO group)
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    max_steps: int | None = None  # None -> task.limits.max_steps
    max_new_tokens: int | None = None  # per step; None -> task.limits.max_new_tokens
    time_budget_s: float | None = None  # None -> task.limits.timeout_s
    token_budget: int | None = None  # whole conversation; None -> the engine's context
    obs_max_chars: int = 2000
    concurrency: int = 64  # episodes (and sandbox sessions) alive at once
    retries: int = 1  # re-runs of an episode whose sandbox failed
    step_weight: float = 0.0  # reward bonus for solving in few steps
    malformed_penalty: float = 0.0  # reward subtracted per malformed call
    verify_timeout_s: float = 60.0
    tools_prompt: str = "auto"  # how the tools reach the model: auto | template | text | none (tool_prompt.py)


@dataclass
class _Episode:
    task: Task
    tools: dict[str, Tool]
    state: dict[str, Any]
    ids: list[int]
    turns: list[Turn]
    deadline: float
    max_steps: int
    token_budget: int
    failed: list[dict[str, Any]]
    timings: dict[str, float]
    malformed: int = 0


class AgentRunner:
    """Runs episodes; holds what they share (engine batcher, codec, sandbox, verifiers)."""

    def __init__(self, engine: Any, tokenizer: Any, opts: AgentOptions, sandbox: Any = None,
                 verifier_runner: Any = None, step: int = 0) -> None:
        from posttrain.verifiers.run import VerifierRunner

        self.engine, self.tok, self.opts, self.sandbox, self.step = engine, tokenizer, opts, sandbox, step
        self.codec = ChatCodec(tokenizer)
        self.batcher = GenBatcher(engine)
        self.verifiers = verifier_runner or VerifierRunner(sandbox)
        self.context = int(engine.max_len) if isinstance(engine, EngineInfo) else 1 << 30
        self._modes: dict[tuple[str, ...], str] = {}  # tool names -> the concrete tools_prompt mode

    def prompt_ids(self, task: Task, tools: dict[str, Tool]) -> tuple[int, ...]:
        """The task's prompt with its tools shown as `opts.tools_prompt` says (tool_prompt.py)."""
        from posttrain.rollout.agent.tool_prompt import agent_prompt_ids, resolve

        key = tuple(tools)
        if key not in self._modes:  # `auto` weighs the listing against what the episode may spend
            self._modes[key] = resolve(self.tok, tools, self.opts.tools_prompt, self.budget)
        return agent_prompt_ids(self.tok, task.prompt, tools, self._modes[key])[0]

    @property
    def budget(self) -> int:
        """Tokens an episode's whole conversation may take: `token_budget`, within the context."""
        return min(self.opts.token_budget or self.context, self.context)

    # ---- one step -----------------------------------------------------------------------
    async def _generate(self, ep: _Episode, rid: str, seed: int | None) -> Any:
        room = ep.token_budget - len(ep.ids)
        max_new = min(self.opts.max_new_tokens or ep.task.limits.max_new_tokens, room)
        params = SamplingParams(temperature=self.opts.temperature, top_p=self.opts.top_p, max_new_tokens=max_new,
                                seed=seed)
        t0 = time.perf_counter()
        c = await self.batcher.generate(GenRequest(tuple(ep.ids), params, id=rid,
                                                   deadline_s=max(0.0, ep.deadline - time.monotonic())))
        ep.timings["generate_s"] += time.perf_counter() - t0
        return c, time.perf_counter() - t0

    async def _act(self, ep: _Episode, call: Any) -> tuple[str, ExecResult, float]:
        tool = ep.tools[call.name]
        t0 = time.perf_counter()
        obs = await execute(tool, call.arguments, ep.state, max(0.001, ep.deadline - time.monotonic()))
        dt = time.perf_counter() - t0
        ep.timings["sandbox_s" if tool.needs_session else "tool_s"] += dt
        return obs.text, obs.result, dt

    async def _step(self, ep: _Episode, k: int, seed: int | None) -> str | None:
        """One generate-parse-execute-observe step; returns a finish reason or None to go on."""
        step_no = sum(t.role == "assistant" for t in ep.turns)
        c, gen_dt = await self._generate(ep, f"{self.step}:{ep.task.id}:{k}:{step_no}", seed)
        if c.finish_reason == "error":
            raise _EngineFailed(c.error)
        text = self.codec.reply_text(c.token_ids)
        ep.ids.extend(c.token_ids)
        reply = Turn("assistant", text, tuple(c.token_ids), tuple(c.logprobs), True, None, None, gen_dt,
                     tuple(c.token_versions))
        if c.finish_reason == "deadline":
            ep.turns.append(reply)
            return "time_budget"
        ended = c.finish_reason == "stop"
        try:
            if not ended:
                raise ToolCallError("unterminated", f"reply cut at the {len(c.token_ids)}-token step limit")
            call = parse_tool_call(text, {n: t.schema for n, t in ep.tools.items()})
        except ToolCallError as e:
            call, err = None, e
        else:
            err = None
        if err is None and call is None:
            ep.turns.append(reply)
            return "answer"
        if err is None and ep.tools[call.name].ends_episode:
            ep.turns.append(dataclasses.replace(reply, tool_call=call))
            return "submit"
        if err is not None:
            ep.malformed += 1
            obs, res, dt = f"error: {err}", ExecResult("nonzero_exit", error=f"parse:{err.reason}: {err}"), 0.0
            ep.failed.append({"step": step_no, "kind": f"parse:{err.reason}", "error": str(err)})
        else:
            obs, res, dt = await self._act(ep, call)
            if res.status != "ok":
                ep.failed.append({"step": step_no, "kind": res.status, "error": res.error or obs[-200:]})
        ep.turns.append(dataclasses.replace(reply, tool_call=call))
        return self._observe(ep, obs, res, dt, ended)

    def _observe(self, ep: _Episode, obs: str, res: ExecResult, dt: float, ended: bool) -> str | None:
        text = truncate(obs, self.opts.obs_max_chars)
        ids = self.codec.observation_ids(text, ended)
        room = ep.token_budget - len(ep.ids) - 2  # leave room for at least one generated token
        if len(ids) > room:  # shrink to what fits; if nothing useful fits, the budget is spent
            text = truncate(obs, max(0, room - (len(ids) - len(text)) - 40))
            ids = self.codec.observation_ids(text, ended)
            if len(ids) > room:
                return "token_budget"
        ep.turns.append(Turn("tool", text, ids, (), False, None, res, dt))
        ep.ids.extend(ids)
        return None

    # ---- one episode --------------------------------------------------------------------
    async def _loop(self, ep: _Episode, k: int, seed: int | None) -> str:
        while True:
            if sum(t.role == "assistant" for t in ep.turns) >= ep.max_steps:
                return "max_steps"
            if time.monotonic() >= ep.deadline:
                return "time_budget"
            if ep.token_budget - len(ep.ids) < 2:
                return "token_budget"
            reason = await self._step(ep, k, None if seed is None else seed + len(ep.turns))
            if reason is not None:
                return reason

    async def episode(self, task: Task, group: int, k: int, attempt: int = 0) -> Trajectory:
        from posttrain.tasks.tools_impl import close_state, init_state

        t0 = time.perf_counter()
        limits = task.limits
        tools = tools_for_task(task)
        prompt = self.prompt_ids(task, tools)
        ep = _Episode(task, tools, init_state(task), list(prompt), [],
                      time.monotonic() + (self.opts.time_budget_s or limits.timeout_s),
                      self.opts.max_steps or limits.max_steps,
                      self.budget, [],
                      {"generate_s": 0.0, "tool_s": 0.0, "sandbox_s": 0.0, "verify_s": 0.0, "attempts": attempt + 1})
        seed = None if self.opts.seed is None else self.opts.seed * 1_000_003 + group * 1009 + k * 7 + attempt
        error, finish, verdict = None, "error", None
        try:
            if needs_session(task) and self.sandbox is not None:
                from posttrain.tasks.terminal import open_task_session

                ts = time.perf_counter()
                async with open_task_session(self.sandbox, task) as session:
                    ep.timings["sandbox_s"] += time.perf_counter() - ts
                    ep.state.update(session=session, sandbox=self.sandbox)
                    finish = await self._loop(ep, k, seed)
                    verdict = await self._verify(ep, prompt, finish, session)
                    ts = time.perf_counter()
                ep.timings["sandbox_s"] += time.perf_counter() - ts
            else:
                finish = await self._loop(ep, k, seed)
                verdict = await self._verify(ep, prompt, finish, None)
        except SandboxDown as e:
            error = TrajError("sandbox", str(e))
        except _EngineFailed as e:
            error = TrajError("engine", str(e))
        except Exception as e:  # noqa: BLE001  e.g. the session could not start: not the model's fault
            error = TrajError("sandbox", f"{type(e).__name__}: {e}")
        close_state(ep.state)  # the episode's Blender, if its tools started one (the verifier used its own)
        ep.timings["total_s"] = time.perf_counter() - t0
        traj = self._trajectory(ep, prompt, group, k, finish if error is None else "error", error)
        if error is not None:
            return dataclasses.replace(traj, verify=VerifyResult.infra(error.message, boundary=error.boundary))
        return self._reward(ep, traj, verdict)

    def _trajectory(self, ep: _Episode, prompt: Sequence[int], group: int, k: int, finish: str,
                    error: TrajError | None) -> Trajectory:
        return Trajectory(task_id=ep.task.id, task_version=ep.task.version, domain=ep.task.domain,
                          prompt_ids=tuple(prompt), turns=tuple(ep.turns),
                          weights_version=min((v for t in ep.turns for v in t.token_versions),
                                              default=self.engine.weights_version),
                          step=self.step, group=group,
                          sample=k, finish_reason=finish, timings=dict(ep.timings), error=error)

    async def _verify(self, ep: _Episode, prompt: Sequence[int], finish: str, session: Any) -> VerifyResult:
        from posttrain.verifiers.base import VerifyContext
        from posttrain.verifiers.rules import episode_format_violation

        t0 = time.perf_counter()
        traj = self._trajectory(ep, prompt, 0, 0, finish, None)
        res = VerifyResult.infra("not run")
        bad = episode_format_violation(ep.task, traj, ep.max_steps)
        if bad is not None:
            res = VerifyResult.fail(bad, rule="format")
        else:
            ctx = VerifyContext(sandbox=self.sandbox, session=session)
            for _ in range(self.verifiers.retries + 1):
                try:
                    v = self.verifiers.verifier_for(ep.task)
                    res = await asyncio.wait_for(v(ep.task, traj, ctx), self.opts.verify_timeout_s)
                except asyncio.TimeoutError:
                    res = VerifyResult.infra(f"verifier timed out after {self.opts.verify_timeout_s}s")
                except Exception as e:  # noqa: BLE001  a verifier bug is an infra error, not the model's fault
                    res = VerifyResult.infra(f"verifier raised {type(e).__name__}: {e}")
                if res.status == "ok":
                    break
        ep.timings["verify_s"] += time.perf_counter() - t0
        return res

    def _reward(self, ep: _Episode, traj: Trajectory, res: VerifyResult) -> Trajectory:
        steps = traj.num_steps
        bonus = self.opts.step_weight * max(0.0, 1.0 - steps / max(1, ep.max_steps)) if res.passed else 0.0
        penalty = self.opts.malformed_penalty * ep.malformed
        details = {**res.details, "agent": {"steps": steps, "finish": traj.finish_reason, "malformed": ep.malformed,
                                            "failed_steps": ep.failed, "step_bonus": bonus, "malformed_penalty": penalty}}
        res = VerifyResult(res.score, res.passed, details, res.status, res.reason)
        err = traj.error
        if res.status == "infra_error":
            err = TrajError("verifier", res.reason)
            return dataclasses.replace(traj, verify=res, reward=0.0, error=err)
        return dataclasses.replace(traj, verify=res, reward=res.score + bonus - penalty, error=err)

    async def run(self, tasks: Sequence[Task]) -> list[Trajectory]:
        """`opts.n` episodes per task, request-major (trajs[g * n + k]); infra errors re-run."""
        try:
            return await run_episodes(self.episode, tasks, self.opts)
        finally:
            await self.batcher.close()


async def run_episodes(episode: Callable[..., Awaitable[Trajectory]], tasks: Sequence[Task], opts: Any
                       ) -> list[Trajectory]:
    """`opts.n` episodes per task, request-major (trajs[g * n + k]), at most `opts.concurrency`
    at once; an episode with an infra error is re-run up to `opts.retries` times. Shared by the
    native loop and the external-agent runner (external.py)."""
    sem = asyncio.Semaphore(opts.concurrency)

    async def one(g: int, k: int) -> Trajectory:
        traj = None
        for attempt in range(opts.retries + 1):
            async with sem:
                traj = await episode(tasks[g], g, k, attempt)
            if not traj.infra_error:
                break
        return traj

    return list(await asyncio.gather(*(one(g, k) for g in range(len(tasks)) for k in range(opts.n))))


class _EngineFailed(Exception):
    pass


async def rollout_agent(engine: Any, tokenizer: Any, tasks: Sequence[Task], opts: AgentOptions,
                        sandbox: Any = None, verifier_runner: Any = None, step: int = 0) -> list[Trajectory]:
    """Run and score `opts.n` episodes per task; see the module doc."""
    return await AgentRunner(engine, tokenizer, opts, sandbox, verifier_runner, step).run(tasks)
