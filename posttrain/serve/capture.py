"""The token-capturing proxy: `/episodes/{id}/v1/chat/completions`, one recorder per episode.

    reg = EpisodeRegistry(); ep = reg.open(task, tools, max_calls=12)
    # the agent's OPENAI_BASE_URL is f"{url}/episodes/{ep.id}/v1"; tools run at .../tools/{name}
    calls = reg.close(ep.id).calls      # CapturedCall per model call, exact ids

Multi-turn drift is what re-tokenising a conversation causes: the text of an earlier
reply, rendered and tokenised again, need not give the ids the model sampled. So the
chat template is applied once, to the first call's messages; a later call whose messages
start with everything sent before plus the reply returned (compared as role, text and
tool calls) is built as *previous prompt ids + previous completion ids (exact, with the
EOS the model emitted) + the ids of the new messages only*. The new messages' ids are
the chat template's rendering of them after a probe conversation (the difference of two
renderings, as agent_render.ChatCodec does for observations). A call whose history does
not extend the previous one (the agent rewrote or dropped turns) is rendered from
scratch and flagged `rerendered`; the trajectory keeps the consistent chain before it.

A `tool_choice` that forces a call ("required", a named function) appends the call's
opening to the prompt (chat.ChatFormat.forced_prefix): the captured prompt ids end with
those ids, the completion ids are only what the model sampled, and `prompt_ids +
completion_ids` stays the exact prefix of the next chained prompt.

Tool calls may run here (`POST .../tools/{name}` with the arguments object): in the
task's own tool state and sandbox session, with the tool's timeout, recorded with their
ExecResult, so tool_use verification and terminal checks see them as in the native loop.

Limits: n = 1 per call (an episode is one path); the template must be append-only.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request

from posttrain.serve.protocol import ApiError, ChatMessage, ChatRequest, parse

_PROBE = [ChatMessage(role="user", content="u"), ChatMessage(role="assistant", content="a")]


@dataclass(frozen=True)
class CapturedCall:
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    weights_version: int
    finish_reason: str  # the engine's: stop, length, deadline
    message: dict[str, Any]  # the assistant message returned to the agent
    reused_tokens: int  # prompt tokens taken verbatim from the previous call (ids, not text)
    rerendered: bool  # the history did not extend the previous call: rendered from scratch
    wall_s: float  # the request's body received -> the reply's ids recorded
    prefix: str = ""  # the call opening tool_choice forced: its ids end prompt_ids; the reply is prefix + completion


@dataclass
class EpisodeCapture:
    id: str
    task: Any
    state: dict[str, Any]  # tool state (tables, session) for .../tools/{name}
    max_calls: int
    calls: list[CapturedCall] = field(default_factory=list)
    executions: list[tuple[int, str, dict, Any]] = field(default_factory=list)  # (after call i, tool, args, ExecResult)
    history: list[tuple] = field(default_factory=list)  # normalised messages the next call must start with
    budget_hit: bool = False
    override: dict[str, Any] = field(default_factory=dict)  # the run's sampling, forced on every call
    sandbox_error: str = ""  # the session died under a tool call: an infra error, not the model's
    closed: bool = False


def _norm(role: str, text: str, tool_calls: Any) -> tuple:
    calls = []
    for c in tool_calls or []:
        fn = c["function"] if isinstance(c, dict) else c.function.model_dump()
        try:
            args = json.loads(fn["arguments"]) if isinstance(fn["arguments"], str) else fn["arguments"]
        except json.JSONDecodeError:
            args = fn["arguments"]
        calls.append((fn["name"], json.dumps(args, sort_keys=True)))
    return ("system" if role == "developer" else role, (text or "").strip(), tuple(calls))


def _norm_msg(m: ChatMessage) -> tuple:
    if not m.tool_calls and isinstance(m.content, str):  # the common message, inline: every call normalises all
        return ("system" if m.role == "developer" else m.role, m.content.strip(), ())
    return _norm(m.role, m.text(), m.tool_calls)


def delta_ids(fmt: Any, new: list[ChatMessage], tools: Any, ended: bool) -> tuple[int, ...]:
    """Ids of `new` messages (plus the next assistant header) following an assistant turn."""
    plain = fmt.tool_dicts(tools)
    before = fmt.render_cached(_PROBE, tools, generation=False, name="capture._PROBE", plain=plain)
    after = fmt.render(_PROBE + list(new), tools, generation=True, plain=plain)
    eos = fmt.tok.eos_token or ""
    at = before.rfind("a") + 1
    if not after.startswith(before[:at]) or not before[at:].startswith(eos):
        raise ApiError(400, "the chat template does not render earlier turns independently of later ones",
                       code="template_not_append_only")
    return fmt.encode(("" if ended else eos) + after[at + len(eos):])


class EpisodeRegistry:
    def __init__(self) -> None:
        self.open_: dict[str, EpisodeCapture] = {}
        self._ids = itertools.count()

    def open(self, task: Any, state: dict[str, Any], max_calls: int, prefix: str = "ep") -> EpisodeCapture:
        ep = EpisodeCapture(f"{prefix}-{next(self._ids)}", task, state, max_calls)
        self.open_[ep.id] = ep
        return ep

    def get(self, eid: str) -> EpisodeCapture:
        ep = self.open_.get(eid)
        if ep is None or ep.closed:
            raise ApiError(404, f"no open episode {eid!r}", code="episode_not_found", kind="not_found_error")
        return ep

    def close(self, eid: str) -> EpisodeCapture:
        ep = self.open_.pop(eid)
        ep.closed = True
        return ep


def build_prompt(state: Any, ep: EpisodeCapture, body: ChatRequest, msgs: list[tuple] | None = None
                 ) -> tuple[tuple[int, ...], int, bool]:
    """(prompt ids, tokens reused verbatim, rerendered) for the episode's next call; `msgs`: the body's
    messages normalised (`_norm_msg`), when the caller has them already."""
    msgs = [_norm_msg(m) for m in body.messages] if msgs is None else msgs
    tools = body.tools if body.tool_choice != "none" else None
    if ep.calls and len(msgs) > len(ep.history) and msgs[: len(ep.history)] == ep.history:
        prev = ep.calls[-1]
        base = prev.prompt_ids + prev.completion_ids
        ended = bool(prev.completion_ids) and prev.completion_ids[-1] in state.fmt.stop_ids
        return base + delta_ids(state.fmt, body.messages[len(ep.history):], tools, ended), len(base), False
    return state.fmt.prompt_ids(body.messages, tools), 0, bool(ep.calls)


def _forced(body: ChatRequest, override: dict[str, Any]) -> ChatRequest:
    """The request with the run's sampling: temperature, top_p and seed replaced, max_tokens capped."""
    if not override:
        return body
    upd = {k: override[k] for k in ("temperature", "top_p", "seed") if k in override}
    cap = override.get("max_tokens_cap")
    if cap:
        upd["max_tokens"] = min(body.limit() or cap, cap)
        upd["max_completion_tokens"] = None
    return body.model_copy(update=upd)


async def episode_chat(state: Any, eid: str, raw: bytes, t0: float) -> Any:
    """One model call of episode `eid` (its raw JSON body): the response, the call recorded. Served by the
    app's fast path (app.py), outside FastAPI's routing; `t0`: when the body had arrived."""
    from posttrain.serve.chat_route import chat_response

    ep = state.episodes.get(eid)
    body = parse(ChatRequest, raw)
    state.check_model(body.model)
    body = _forced(body, ep.override)
    if body.n != 1:
        raise ApiError(400, "an episode call generates one reply (n=1)", param="n")
    if len(ep.calls) >= ep.max_calls:
        ep.budget_hit = True
        raise ApiError(429, f"step budget of {ep.max_calls} model calls is spent", code="step_budget")
    msgs = [_norm_msg(m) for m in body.messages]  # once: the chain check now, the recorded history after
    prompt, reused, rerendered = build_prompt(state, ep, body, msgs)
    prefix = state.fmt.forced_prefix(body.tools, body.tool_choice)[0]

    def on_done(outs: list, version: int, messages: list, ran: tuple[int, ...]) -> None:
        c, m = outs[0], messages[0]  # ran: the prompt ids plus the ids tool_choice forced (prompt tokens)
        ep.calls.append(CapturedCall(ran, tuple(c.token_ids), tuple(c.logprobs), version, c.finish_reason, m,
                                     reused, rerendered, time.perf_counter() - t0, prefix))
        ep.history = msgs + [_norm("assistant", m.get("content") or "", m.get("tool_calls"))]

    return await chat_response(state, body, prompt, on_done)


def add_episode_routes(app: FastAPI, state: Any) -> None:
    from posttrain.serve.protocol import read_body as _body

    reg: EpisodeRegistry = state.episodes

    @app.get("/episodes/{eid}/v1/models")
    async def ep_models(eid: str) -> dict[str, Any]:
        reg.get(eid)
        return {"object": "list", "data": [{"id": state.model_name, "object": "model", "created": state.created,
                                            "owned_by": "posttrain"}]}

    @app.post("/episodes/{eid}/v1/chat/completions")
    async def ep_chat(eid: str, request: Request) -> Any:  # reached only where the fast path does not apply
        raw = await _body(request)
        return await episode_chat(state, eid, raw, time.perf_counter())

    @app.post("/episodes/{eid}/tools/{name}")
    async def ep_tool(eid: str, name: str, request: Request) -> dict[str, Any]:
        from posttrain.rollout.agent.tools import SandboxDown, execute, tools_for_task

        ep = reg.get(eid)
        tools = tools_for_task(ep.task)
        if name not in tools:
            raise ApiError(404, f"unknown tool {name!r}; available: {', '.join(sorted(tools))}", param="name")
        raw = await _body(request)
        try:
            args = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise ApiError(400, "tool arguments must be a JSON object") from None
        if not isinstance(args, dict):
            raise ApiError(400, "tool arguments must be a JSON object")
        from posttrain.rollout.agent.toolcall import ToolCallError, check_arguments

        try:  # the native loop's argument check: a bad call is an observation, not an HTTP error
            check_arguments(name, args, tools[name].schema)
        except ToolCallError as e:
            ep.executions.append((len(ep.calls), name, args, None))
            return {"output": f"error: {e}", "status": "bad_arguments"}
        deadline = ep.state.get("deadline")
        left = None if deadline is None else max(0.001, deadline - time.monotonic())
        try:
            obs = await execute(tools[name], args, ep.state, left)
        except SandboxDown as e:
            ep.sandbox_error = str(e)
            raise ApiError(503, f"the episode's sandbox failed: {e}", kind="server_error", code="sandbox_down") from None
        ep.executions.append((len(ep.calls), name, args, obs.result))
        return {"output": obs.text, "status": obs.result.status}

