"""Agent tools: a name, a JSON Schema for the arguments, an implementation and a timeout.

    tool = get_tool("calculator")                 # Tool(name, description, schema, fn, timeout_s)
    tools = tools_for_task(task)                  # what one episode may call, by name
    obs = await execute(tool, {"expression": "2*3"}, state)   # -> Observation(text, ExecResult)

Importing this module registers every built-in in the "tool" registry (it is the module
the registry imports for that kind): the domain tools of `posttrain.tasks.tools_impl`
(calculator, lookup, convert, shell) and `posttrain.tasks.scene_api` (scene_*), plus the
agent built-ins below: `bash`, `python`, `read_file`, `write_file` (in the episode's
sandbox session) and `submit` (ends the episode; the final state is scored). A tool is a
declared `Tool` (tasks/tool_base.py): `fn(state, **arguments) -> str` (or an awaitable) with
its description, schema, timeout, whether it needs a session and whether it ends the episode.

`execute` never raises for what the tool did: a bad call (`ToolError`), a timeout, or a
bug in the tool becomes an observation whose `ExecResult` says so (`status`, `error`).
It raises `SandboxDown` only when the sandbox itself failed: the episode is then an
infrastructure error, retried and kept out of the gradient.

Limits: a synchronous tool runs in a daemon thread; on timeout the episode goes on, but
Python cannot kill the thread, so a tool that never returns keeps a thread (tools that
run untrusted work must go through the sandbox, where a timeout kills the processes).
"""

from __future__ import annotations

import asyncio
import inspect
import shlex
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from posttrain.errors import SandboxError
from posttrain.tasks import scene_api  # noqa: F401  registers the scene tools
from posttrain.tasks.tool_base import DEFAULT_TIMEOUT_S, TOOLS, Tool, ToolError, tool_fn  # noqa: F401  (Tool: re-exported)
import posttrain.tasks.tools_impl  # noqa: F401  registers the domain tools
from posttrain.types import ExecResult, Task

SESSION_TOOLS = ("bash", "python", "read_file", "write_file")
RECORD_CHARS = 1 << 16  # output kept in an in-process tool's ExecResult


class SandboxDown(Exception):
    """The episode's sandbox failed (not the model's doing): an infrastructure error."""


@dataclass(frozen=True)
class Observation:
    text: str
    result: ExecResult


def get_tool(name: str) -> Tool:
    """The registered tool `name` (ConfigError naming the known tools when unknown)."""
    return TOOLS.get(name)


def needs_session(task: Task) -> bool:
    return bool(task.metadata.get("needs_sandbox")) or any(
        get_tool(n).needs_session for n in task.environment.tools)


def tools_for_task(task: Task) -> dict[str, Tool]:
    """The task's own tools, `submit`, and the session built-ins when the task has a sandbox."""
    names = list(task.environment.tools) + ["submit"]
    if needs_session(task):
        names += [n for n in SESSION_TOOLS if n not in names]
    return {n: get_tool(n) for n in names}


# ---- execution ---------------------------------------------------------------------------


def _in_daemon_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> asyncio.Future:
    """Run a sync tool off the event loop in a daemon thread (a hung one never blocks exit)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not fut.done():
            fut.set_result(value) if ok else fut.set_exception(value)

    def work() -> None:
        try:
            out = fn(**kwargs)
            ok = True
        except BaseException as e:  # noqa: BLE001  delivered to the awaiting episode
            out, ok = e, False
        try:
            loop.call_soon_threadsafe(settle, ok, out)
        except RuntimeError:  # the loop closed while the tool ran
            pass

    threading.Thread(target=work, daemon=True, name="pt-tool").start()
    return fut


async def _call(tool: Tool, args: dict[str, Any], state: dict[str, Any]) -> str:
    if inspect.iscoroutinefunction(tool.fn):
        out = await tool.fn(state, **args)
    else:
        out = await _in_daemon_thread(tool.fn, {"state": state, **args})
        if inspect.isawaitable(out):
            out = await out
    return str(out)


async def execute(tool: Tool, args: Mapping[str, Any], state: dict[str, Any], timeout_s: float | None = None
                  ) -> Observation:
    """Run one validated call under min(tool timeout, `timeout_s`); see the module doc."""
    limit = tool.timeout_s if timeout_s is None else max(0.001, min(tool.timeout_s, timeout_s))
    state["tool_timeout_s"] = state["shell_timeout_s"] = limit  # read by the session tools
    n_exec = len(state.get("exec_results", []))
    t0 = time.perf_counter()
    try:
        text = await asyncio.wait_for(_call(tool, dict(args), state), limit)
        status, err = "ok", ""
    except asyncio.TimeoutError:
        text, status, err = f"error: {tool.name} timed out after {limit:g}s", "timeout", f"tool timeout after {limit:g}s"
    except ToolError as e:
        text, status, err = f"error: {e}", "nonzero_exit", f"tool: {e}"
    except (SandboxError, SandboxDown) as e:
        raise SandboxDown(f"{tool.name}: {e}") from None
    except Exception as e:  # noqa: BLE001  a bug in a tool is shown, never a crash of the run
        text, status, err = f"error: {tool.name} failed: {type(e).__name__}: {e}", "nonzero_exit", f"tool raised {type(e).__name__}: {e}"
    wall = time.perf_counter() - t0
    execs = state.get("exec_results", [])
    if len(execs) > n_exec:  # a sandbox step: its own result, with what the loop learned
        res = execs[-1]
        if res.status == "sandbox_error":
            raise SandboxDown(f"{tool.name}: {res.error or 'sandbox error'}")
        return Observation(text, res)
    kept = text[:RECORD_CHARS]  # the record keeps a bounded copy; the loop truncates the observation
    return Observation(text, ExecResult(status=status, exit_code=0 if status == "ok" else None, stdout=kept,
                                        stdout_truncated=len(kept) < len(text), wall_s=wall, cpu_s=0.0, error=err))


# ---- built-ins: session tools and submit ----------------------------------------------------


def _session(state: dict[str, Any], name: str) -> Any:
    s = state.get("session")
    if s is None:
        raise ToolError(f"{name}: no sandbox session in this episode")
    return s


async def _run_in_session(state: dict[str, Any], name: str, cmd: str) -> str:
    session = _session(state, name)
    res = await session.run(cmd, timeout=state.get("tool_timeout_s", DEFAULT_TIMEOUT_S))
    state.setdefault("exec_results", []).append(res)
    out = res.stdout + res.stderr
    if res.status == "timeout":
        return out + f"\n[timed out after {state.get('tool_timeout_s', DEFAULT_TIMEOUT_S):g}s]"
    return out + (f"\n[exit {res.exit_code}]" if res.status != "ok" else "")


@tool_fn("bash", "Run a bash command in the task's sandbox; cwd, environment and files persist between calls.",
         {"type": "object", "properties": {"command": {"type": "string", "minLength": 1, "maxLength": 10000}},
          "required": ["command"], "additionalProperties": False}, timeout_s=10.0, needs_session=True)
async def bash(state: dict[str, Any], command: str) -> str:
    return await _run_in_session(state, "bash", command)


@tool_fn("python", "Run a Python 3 program in the task's sandbox (in the session's working directory).",
         {"type": "object", "properties": {"code": {"type": "string", "minLength": 1, "maxLength": 20000}},
          "required": ["code"], "additionalProperties": False}, timeout_s=10.0, needs_session=True)
async def python(state: dict[str, Any], code: str) -> str:
    return await _run_in_session(state, "python", f"python3 -c {shlex.quote(code)}")


@tool_fn("read_file", "Read a text file from the task's workspace.",
         {"type": "object", "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 512}},
          "required": ["path"], "additionalProperties": False}, timeout_s=5.0, needs_session=True)
async def read_file(state: dict[str, Any], path: str) -> str:
    try:
        data = await _session(state, "read_file").read_file(path)
    except (OSError, ValueError) as e:
        raise ToolError(f"read_file: cannot read {path!r}: {e}") from None
    return data.decode("utf-8", errors="replace")


@tool_fn("write_file", "Write (create or replace) a text file in the task's workspace.",
         {"type": "object", "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 512},
                                           "content": {"type": "string", "maxLength": 1 << 20}},
          "required": ["path", "content"], "additionalProperties": False}, timeout_s=5.0, needs_session=True)
async def write_file(state: dict[str, Any], path: str, content: str) -> str:
    try:
        await _session(state, "write_file").write_file(path, content)
    except (OSError, ValueError) as e:
        raise ToolError(f"write_file: cannot write {path!r}: {e}") from None
    return f"wrote {len(content.encode())} bytes to {path}"


@tool_fn("submit", "Finish the episode: the task's final state is checked now.",
         {"type": "object", "properties": {}, "additionalProperties": False}, timeout_s=1.0, ends_episode=True)
def submit(state: dict[str, Any]) -> str:
    return "submitted"

