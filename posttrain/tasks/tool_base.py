"""The tool registration helper and the error a wrong tool call raises.

Shared by the tool modules (tools_impl.py, scene_api.py, rollout/agent/tools.py) so that none of
them imports another just for these two names.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from posttrain.registry import tool


class ToolError(Exception):
    """A tool call the model got wrong (bad arguments, unknown key): shown as the observation."""


def tool_fn(name: str, description: str, parameters: Mapping[str, Any]) -> Callable:
    """Register `fn` as tool `name` with a JSON Schema (`parameters`) for its arguments."""

    def deco(fn: Callable) -> Callable:
        fn.tool_name, fn.description, fn.schema = name, description, dict(parameters)
        return tool(name)(fn)

    return deco
