"""τ²-bench episodes: the policy is the agent, a second model plays the customer, tau2 holds the database.

    runner = Tau2Runner(engine, tokenizer, user=active_service("user"), opts=Tau2Options(max_steps=30))
    trajs = await runner.run(tasks)           # one Trajectory per task, verified (reward from DB state)

An episode alternates three parties. The simulated user (`user`, a `ModelService`) opens
the conversation from the task's user scenario and answers every plain-text agent message;
it ends the conversation by writing `###STOP###` (tau2's convention). The agent (the policy,
token by token through posttrain's engine, so the episode trains like any other) replies
with plain text (to the user) or one `<tool_call>` (to the environment). Tool calls run
against the episode's own copy of the task's database (tasks/tau2_env.py).

Token layout, for training: the task prompt, then for each exchange the user turn's ids
(mask 0), the agent's reply (mask 1, with its sampled logprobs), tool observations (mask 0).
User and tool turns are framed by the chat template itself (the difference between
rendering a probe conversation with and without the message), like rollout/agent/render.py.

Failures: a user model that fails (error, timeout, after its retries) makes the episode an
infrastructure error (boundary `engine`: the second model's engine), kept out of the gradient.
Timings per episode: `generate_s` (agent), `user_s` (the second model), `tool_s`, `verify_s`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from posttrain.rollout.agent.gen import GenBatcher
from posttrain.rollout.agent.render import ChatCodec, truncate
from posttrain.rollout.agent.toolcall import ToolCallError, parse_tool_call
from posttrain.rollout.engine import EngineInfo, GenRequest, SamplingParams
from posttrain.rollout.prompting import encode_prompt
from posttrain.tasks.tau2_env import Tau2Env, agent_tool_schemas
from posttrain.types import ExecResult, Task, Trajectory, TrajError, Turn, VerifyResult

STOP = "###STOP###"
_SENT = "\x00PT_USER\x00"
_USER_SYSTEM = ("You are a customer talking to a customer-service agent. Follow your scenario below; reveal "
                "details only when asked; write only what the customer says, one short message at a time. "
                f"When your goal is met, or cannot be met, write {STOP}.\n\nScenario:\n{{scenario}}")


@dataclass(frozen=True)
class Tau2Options:
    max_steps: int = 30  # agent turns (replies and tool calls)
    max_user_turns: int = 10
    max_new_tokens: int = 256  # per agent turn
    temperature: float = 1.0
    obs_max_chars: int = 2000
    concurrency: int = 16  # episodes at once
    seed: int | None = None


@dataclass
class _Ep:
    task: Task
    env: Tau2Env
    ids: list[int]
    turns: list[Turn] = field(default_factory=list)
    user_view: list[dict[str, str]] = field(default_factory=list)  # the conversation as the customer sees it
    timings: dict[str, float] = field(default_factory=lambda: {"generate_s": 0.0, "user_s": 0.0, "tool_s": 0.0,
                                                               "verify_s": 0.0})
    steps: int = 0
    user_turns: int = 0


class _UserFailed(Exception):
    pass


def user_turn_framing(tok: Any, eos_text: str) -> tuple[str, str]:
    """(prefix, suffix) the chat template puts around a user message that follows an assistant turn."""
    base = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    before = tok.apply_chat_template(base, tokenize=False)
    after = tok.apply_chat_template(base + [{"role": "user", "content": _SENT}], add_generation_prompt=True,
                                    tokenize=False)
    at = before.rfind("a") + 1 + len(eos_text)
    pre, post = after[at:].split(_SENT, 1)
    return pre, post


class Tau2Runner:
    def __init__(self, engine: Any, tokenizer: Any, user: Any, opts: Tau2Options = Tau2Options(),
                 verifier_runner: Any = None, step: int = 0) -> None:
        from posttrain.verifiers.run import VerifierRunner

        self.tok, self.user, self.opts, self.step = tokenizer, user, opts, step
        self.codec = ChatCodec(tokenizer)
        self.batcher = GenBatcher(engine)
        self.engine = engine
        self.context = int(engine.max_len) if isinstance(engine, EngineInfo) else 1 << 30  # as AgentRunner: an engine need not bound it
        self.verifiers = verifier_runner or VerifierRunner(None)
        self.user_pre, self.user_post = user_turn_framing(tokenizer, self.codec.eos_text)

    async def _user_says(self, ep: _Ep) -> str:
        t0 = time.perf_counter()
        conv = [{"role": "system", "content": _USER_SYSTEM.format(scenario=ep.task.metadata["user_scenario"])}]
        conv += ep.user_view or [{"role": "user", "content": "Hi! How can I help you today?"}]
        reply = await self.user.chat_one(conv)
        ep.timings["user_s"] += time.perf_counter() - t0
        if not reply.ok:
            raise _UserFailed(f"user model failed: {reply.error}")
        ep.user_turns += 1
        return reply.text.strip() or STOP

    def _append_user(self, ep: _Ep, text: str, ended: bool) -> None:
        lead = "" if ended else self.codec.eos_text
        ids = self.codec.encode(lead + self.user_pre + text + self.user_post)
        ep.turns.append(Turn("user", text, ids, (), False))
        ep.ids.extend(ids)
        ep.user_view.append({"role": "assistant", "content": text})

    async def _agent_step(self, ep: _Ep, k: int) -> tuple[Turn, bool]:
        room = self.context - len(ep.ids)
        if room < 2:
            raise OverflowError("context full")
        seed = None if self.opts.seed is None else self.opts.seed + 7919 * k + ep.steps
        params = SamplingParams(temperature=self.opts.temperature, max_new_tokens=min(self.opts.max_new_tokens, room - 1),
                                seed=seed)
        t0 = time.perf_counter()
        c = await self.batcher.generate(GenRequest(tuple(ep.ids), params, id=f"{ep.task.id}:{k}:{ep.steps}"))
        dt = time.perf_counter() - t0
        ep.timings["generate_s"] += dt
        if c.finish_reason == "error":
            raise RuntimeError(c.error)
        ep.ids.extend(c.token_ids)
        ep.steps += 1
        text = self.codec.reply_text(c.token_ids)
        return Turn("assistant", text, tuple(c.token_ids), tuple(c.logprobs), True, None, None, dt), c.finish_reason == "stop"

    def _tool(self, ep: _Ep, reply: Turn, ended: bool) -> bool:
        """Run the reply's tool call, if it is one; False when the reply is plain text for the user."""
        schemas = {s["function"]["name"]: s["function"]["parameters"] for s in agent_tool_schemas(ep.env.domain)}
        try:
            call = parse_tool_call(reply.text, schemas)
        except ToolCallError as e:
            call, obs, res = None, f"Error: {e}", ExecResult("nonzero_exit", error=f"parse:{e.reason}")
        else:
            if call is None:
                ep.turns.append(reply)
                return False
            t0 = time.perf_counter()
            obs, ok = ep.env.call(call.name, call.arguments)
            ep.timings["tool_s"] += time.perf_counter() - t0
            res = ExecResult("ok" if ok else "nonzero_exit", error="" if ok else obs[:200])
        ep.turns.append(dataclasses.replace(reply, tool_call=call))
        text = truncate(obs, self.opts.obs_max_chars)
        ids = self.codec.observation_ids(text, ended)
        ep.turns.append(Turn("tool", text, ids, (), False, None, res))
        ep.ids.extend(ids)
        return True

    async def _loop(self, ep: _Ep, k: int) -> str:
        self._append_user(ep, await self._user_says(ep), ended=True)
        while ep.steps < self.opts.max_steps:
            try:
                reply, ended = await self._agent_step(ep, k)
            except OverflowError:
                return "token_budget"
            if self._tool(ep, reply, ended):
                continue
            ep.user_view.append({"role": "user", "content": reply.text})
            if ep.user_turns >= self.opts.max_user_turns:
                return "max_user_turns"
            said = await self._user_says(ep)
            if STOP in said:
                return "user_stop"
            self._append_user(ep, said, ended)
        return "max_steps"

    async def episode(self, task: Task, k: int = 0) -> Trajectory:
        t0 = time.perf_counter()
        dom, tid = task.metadata["tau2_domain"], task.metadata["tau2_task_id"]
        env = await asyncio.to_thread(Tau2Env.fresh, dom, tid)
        prompt = encode_prompt(self.tok, task.prompt)
        ep = _Ep(task, env, list(prompt))
        error, finish = None, "error"
        try:
            finish = await self._loop(ep, k)
        except _UserFailed as e:
            error = TrajError("engine", str(e))
        except RuntimeError as e:
            error = TrajError("engine", f"agent engine: {e}")
        traj = Trajectory(task.id, task.version, task.domain, tuple(prompt), tuple(ep.turns),
                          weights_version=self.engine.weights_version, step=self.step, sample=k,
                          finish_reason=finish, timings=ep.timings, error=error)
        if error is not None:
            return dataclasses.replace(traj, verify=VerifyResult.infra(error.message, boundary="engine"))
        tv = time.perf_counter()
        out = await self.verifiers.verify_one(task, traj)
        ep.timings.update(verify_s=time.perf_counter() - tv, total_s=time.perf_counter() - t0,
                          steps=ep.steps, user_turns=ep.user_turns)
        return dataclasses.replace(out, timings=dict(ep.timings))

    async def run(self, tasks: Sequence[Task], n: int = 1) -> list[Trajectory]:
        sem = asyncio.Semaphore(self.opts.concurrency)

        async def one(t: Task, k: int) -> Trajectory:
            async with sem:
                return await self.episode(t, k)

        try:
            return list(await asyncio.gather(*(one(t, k) for t in tasks for k in range(n))))
        finally:
            await self.batcher.close()


def calls_json(traj: Trajectory) -> str:
    """The episode's tool calls, for reports: [{"name", "arguments"}, ...]."""
    return json.dumps([{"name": t.tool_call.name, "arguments": dict(t.tool_call.arguments)}
                       for t in traj.turns if t.tool_call is not None])
