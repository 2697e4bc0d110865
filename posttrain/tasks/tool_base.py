"""The tool type, its registration helper, and the error a wrong tool call raises.

A tool is a declared `Tool` (name, description, JSON Schema, implementation, timeout, whether
it needs the episode's sandbox session, whether it ends the episode); the "tool" registry
holds `Tool`s, never bare functions whose attributes are read one by one. Shared by the tool
modules (tools_impl.py, scene_api.py, rollout/agent/tools.py) so that none of them imports
another just for these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from posttrain.registry import Registry, registry, tool

DEFAULT_TIMEOUT_S = 10.0


class ToolError(Exception):
    """A tool call the model got wrong (bad arguments, unknown key): shown as the observation."""


@dataclass(frozen=True)
class Tool:
    """`fn(state, **arguments) -> str` (or an awaitable of str), with what the agent loop needs to know."""

    name: str
    description: str
    schema: Mapping[str, Any]
    fn: Callable[..., Any]
    timeout_s: float = DEFAULT_TIMEOUT_S
    needs_session: bool = False  # runs in the episode's sandbox session: a task listing it gets one
    ends_episode: bool = False

    def openai_schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": dict(self.schema)}}


TOOLS: "Registry[Tool]" = registry("tool")  # the typed "tool" extension point: declared Tools only


def tool_fn(name: str, description: str, parameters: Mapping[str, Any], timeout_s: float = DEFAULT_TIMEOUT_S,
            needs_session: bool = False, ends_episode: bool = False) -> Callable:
    """Register `fn` as the `Tool` `name` with a JSON Schema (`parameters`) for its arguments; the
    function itself is returned unchanged (it stays callable directly)."""

    def deco(fn: Callable) -> Callable:
        tool(name)(Tool(name, description, dict(parameters), fn, float(timeout_s), needs_session, ends_episode))
        return fn

    return deco
