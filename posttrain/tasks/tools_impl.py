"""Tool implementations for the agent domains: calculator, lookup, unit converter, shell.

Each tool is a function registered with `@tool_fn(name, description, schema, ...)`, which
declares a `Tool` (tasks/tool_base.py) in the "tool" registry:

    t = registry("tool").get("calculator")
    t.schema           # {"type": "object", "properties": {...}, "required": [...]}
    out = await call_tool("calculator", {"expression": "2*(3+4)"}, state)

The signature is `fn(state, **arguments) -> str` (or an awaitable of str). `state` is
the episode's mutable dict, made by `init_state(task)`: `tables` (lookup data from the
task's `lookup.json`), `scene` (a fresh `SceneGraph`) and, for shell tasks, `session`
(a live sandbox session). A bad call raises `ToolError`, which the agent loop shows to
the model as the observation; verifiers count such calls as wrong.

The scene-graph tools live in `posttrain/tasks/scene_api.py` and register through the
same helper; `ensure_registered()` imports both modules.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import operator
import warnings
from typing import Any, Callable, Mapping

from posttrain.registry import registry
import posttrain.tasks.scene_api  # noqa: F401  (registers the scene tools)
import posttrain.tasks.blender_tools  # noqa: F401  (registers the Blender tools; bpy itself runs only in its sandbox)
from posttrain.tasks.scene_api import SceneGraph
from posttrain.tasks.tool_base import ToolError, tool_fn  # noqa: F401  (re-exported: tools register through it)
from posttrain.types import Task, thaw


def ensure_registered() -> None:
    """Every built-in tool is registered once this module is imported (scene_api at the top)."""


_VALIDATORS: dict[str, Any] = {}  # tool name -> its compiled argument validator


def tool_schema(name: str) -> dict[str, Any]:
    """OpenAI-style function description for a prompt's tool list."""
    ensure_registered()
    return registry("tool").get(name).openai_schema()


async def call_tool(name: str, arguments: Mapping[str, Any], state: dict[str, Any]) -> str:
    """Validate `arguments` against the tool's schema, run it, return the observation."""
    import jsonschema

    ensure_registered()
    if name not in registry("tool"):
        raise ToolError(f"unknown tool {name!r}")
    tool = registry("tool").get(name)
    arguments = thaw(arguments)  # frozen ToolCall arguments hold tuples; schemas expect lists
    validator = _VALIDATORS.get(name)
    if validator is None:  # building a validator checks the schema itself: do it once per tool
        validator = _VALIDATORS[name] = jsonschema.Draft202012Validator(dict(tool.schema))
    err = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "arguments"
        raise ToolError(f"{name}: bad argument {where}: {err.message}")
    out = tool.fn(state, **arguments)
    if inspect.isawaitable(out):
        out = await out
    return str(out)


def close_state(state: dict[str, Any]) -> None:
    """End what an episode's tools started (the Blender process of the blender_* tools)."""
    session = state.pop("blender", None)
    if session is not None:
        session.close()


def init_state(task: Task) -> dict[str, Any]:
    """A fresh per-episode tool state for `task`."""
    tables = json.loads(task.environment.files.get("lookup.json", "{}"))
    return {"tables": tables, "scene": SceneGraph()}


# ---- calculator -------------------------------------------------------------------

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCS = {"sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max, "log": math.log, "exp": math.exp}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
            raise ToolError("calculator: exponent too large")
        return _BIN[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _FUNCS[node.func.id](*(_eval(a) for a in node.args))
    raise ToolError(f"calculator: unsupported expression {ast.dump(node)[:40]}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:.10g}"


@tool_fn("calculator", "Evaluate an arithmetic expression (+ - * / // % **, sqrt, abs, round, min, max, log, exp).",
         {"type": "object", "properties": {"expression": {"type": "string", "maxLength": 200}}, "required": ["expression"], "additionalProperties": False})
def calculator(state: dict[str, Any], expression: str) -> str:
    try:
        with warnings.catch_warnings():  # model text like "1if" makes the parser warn on stderr: noise, not news
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(expression, mode="eval")
        return _num(_eval(tree))
    except ToolError:
        raise
    except (SyntaxError, ZeroDivisionError, ValueError, OverflowError, TypeError) as e:
        raise ToolError(f"calculator: {type(e).__name__}: {e}") from None


# ---- lookup -----------------------------------------------------------------------


@tool_fn("lookup", "Look up a value in one of the task's tables by key.",
         {"type": "object", "properties": {"table": {"type": "string"}, "key": {"type": "string"}}, "required": ["table", "key"], "additionalProperties": False})
def lookup(state: dict[str, Any], table: str, key: str) -> str:
    tables = state.get("tables", {})
    if table not in tables:
        raise ToolError(f"lookup: no table {table!r} (tables: {', '.join(sorted(tables))})")
    if key not in tables[table]:
        raise ToolError(f"lookup: no key {key!r} in table {table!r}")
    return str(tables[table][key])


# ---- unit converter ---------------------------------------------------------------

# unit -> (dimension, factor to the SI base unit)
UNITS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0), "km": ("length", 1000.0), "cm": ("length", 0.01), "mm": ("length", 0.001),
    "mi": ("length", 1609.344), "ft": ("length", 0.3048), "in": ("length", 0.0254), "yd": ("length", 0.9144),
    "kg": ("mass", 1.0), "g": ("mass", 0.001), "lb": ("mass", 0.45359237), "oz": ("mass", 0.028349523125),
    "l": ("volume", 1.0), "ml": ("volume", 0.001), "gal": ("volume", 3.785411784),
    "s": ("time", 1.0), "min": ("time", 60.0), "h": ("time", 3600.0), "day": ("time", 86400.0),
    "c": ("temperature", 1.0), "f": ("temperature", 1.0), "k": ("temperature", 1.0),
}


def convert_value(value: float, src: str, dst: str) -> float:
    src, dst = src.lower(), dst.lower()
    for u in (src, dst):
        if u not in UNITS:
            raise ToolError(f"convert: unknown unit {u!r} (known: {', '.join(UNITS)})")
    if UNITS[src][0] != UNITS[dst][0]:
        raise ToolError(f"convert: cannot convert {UNITS[src][0]} ({src}) to {UNITS[dst][0]} ({dst})")
    if UNITS[src][0] == "temperature":
        kelvin = {"c": value + 273.15, "f": (value - 32) * 5 / 9 + 273.15, "k": value}[src]
        return {"c": kelvin - 273.15, "f": (kelvin - 273.15) * 9 / 5 + 32, "k": kelvin}[dst]
    return value * UNITS[src][1] / UNITS[dst][1]


@tool_fn("convert", "Convert a value between units of length, mass, volume, time or temperature.",
         {"type": "object", "properties": {"value": {"type": "number"}, "from_unit": {"type": "string"}, "to_unit": {"type": "string"}},
          "required": ["value", "from_unit", "to_unit"], "additionalProperties": False})
def convert(state: dict[str, Any], value: float, from_unit: str, to_unit: str) -> str:
    return _num(round(convert_value(float(value), from_unit, to_unit), 10))


# ---- shell (terminal tasks) ---------------------------------------------------------


@tool_fn("shell", "Run a shell command in the task's sandbox; cwd and files persist between calls.",
         {"type": "object", "properties": {"cmd": {"type": "string", "maxLength": 10000}}, "required": ["cmd"], "additionalProperties": False},
         timeout_s=10.0, needs_session=True)
async def shell(state: dict[str, Any], cmd: str) -> str:
    session = state.get("session")
    if session is None:
        raise ToolError("shell: no sandbox session in this episode")
    res = await session.run(cmd, timeout=state.get("shell_timeout_s", 10.0))
    state.setdefault("exec_results", []).append(res)
    tail = f"\n[exit {res.exit_code}]" if res.status != "ok" else ""
    return (res.stdout + res.stderr)[-4000:] + tail
