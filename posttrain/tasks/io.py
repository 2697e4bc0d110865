"""Load and save task specs as JSONL (one task per line) or YAML (a list of tasks).

    tasks = load_tasks("suite.jsonl")        # or .yaml / .yml
    save_tasks(tasks, "suite.yaml")

The on-disk form is the dataclass tree of `Task` as plain JSON (see `task_to_dict`), so a
saved task loads back with the same `task.version`. A malformed file raises
`TaskFileError` whose message names the file, the line and the field
(`suite.yaml:12: field 'prompt[0].role': expected one of ...`).

Does not support: attachments' bytes (only their sha256 and relative path are stored;
the image files live beside the task file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from posttrain.errors import TaskFileError
from posttrain.types import Attachment, Environment, Limits, Message, Spec, Task, ToolCall, thaw

_ROLES = ("system", "user", "assistant", "tool")
_TASK_KEYS = {"id", "domain", "prompt", "verifier", "difficulty", "environment", "limits", "metadata", "oracle"}


class FieldError(ValueError):
    """A bad field inside one task; `path` is dotted (`prompt[0].role`)."""

    def __init__(self, path: str, msg: str) -> None:
        super().__init__(msg)
        self.path = path
        self.msg = msg


def task_to_dict(task: Task) -> dict[str, Any]:
    return thaw(task)


def _need(d: Mapping[str, Any], key: str, typ: type | tuple[type, ...], path: str, default: Any = ...) -> Any:
    if key not in d:
        if default is ...:
            raise FieldError(f"{path}{key}", "missing required field")
        return default
    val = d[key]
    if isinstance(val, bool) and typ in (int, float, (int, float)):
        raise FieldError(f"{path}{key}", f"expected a number, got {val!r}")
    if not isinstance(val, typ):
        names = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise FieldError(f"{path}{key}", f"expected {names}, got {type(val).__name__} {_short(val)}")
    return val


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) < 40 else s[:37] + "..."


def _check_keys(d: Mapping[str, Any], allowed: Iterable[str], path: str) -> None:
    extra = sorted(set(d) - set(allowed))
    if extra:
        raise FieldError(f"{path}{extra[0]}", f"unknown field (allowed: {', '.join(sorted(allowed))})")


def spec_from_obj(obj: Any, path: str = "verifier") -> Spec:
    """A Spec from `"name"` or `{"name": ..., "args": {...}}`."""
    if isinstance(obj, Spec):
        return obj
    if isinstance(obj, str) and obj:
        return Spec(obj)
    if not isinstance(obj, Mapping):
        raise FieldError(path, f"expected a name or {{name, args}}, got {_short(obj)}")
    _check_keys(obj, ("name", "args"), path + ".")
    name = _need(obj, "name", str, path + ".")
    args = _need(obj, "args", Mapping, path + ".", {})
    return Spec(name, dict(args))


def message_from_dict(m: Any, path: str) -> Message:
    """One chat message as task files write it (role, content, tool_calls, attachments, name);
    FieldError names the bad field under `path`."""
    return _message(m, path)


def _message(m: Any, path: str) -> Message:
    if not isinstance(m, Mapping):
        raise FieldError(path, f"expected a message object, got {_short(m)}")
    _check_keys(m, ("role", "content", "tool_calls", "attachments", "name"), path + ".")
    role = _need(m, "role", str, path + ".")
    if role not in _ROLES:
        raise FieldError(path + ".role", f"expected one of {', '.join(_ROLES)}, got {role!r}")
    content = _need(m, "content", str, path + ".")
    calls = []
    for i, c in enumerate(_need(m, "tool_calls", list, path + ".", [])):
        cp = f"{path}.tool_calls[{i}]."
        if not isinstance(c, Mapping):
            raise FieldError(cp[:-1], "expected an object")
        calls.append(ToolCall(_need(c, "name", str, cp), dict(_need(c, "arguments", Mapping, cp, {})), _need(c, "id", str, cp, "")))
    atts = []
    for i, a in enumerate(_need(m, "attachments", list, path + ".", [])):
        ap = f"{path}.attachments[{i}]."
        if not isinstance(a, Mapping):
            raise FieldError(ap[:-1], "expected an object")
        _check_keys(a, ("kind", "sha256", "path", "mime"), ap)
        atts.append(Attachment(_need(a, "kind", str, ap), _need(a, "sha256", str, ap), _need(a, "path", str, ap, ""), _need(a, "mime", str, ap, "image/png")))
    return Message(role, content, tuple(calls), tuple(atts), _need(m, "name", str, path + ".", ""))


def _environment(e: Mapping[str, Any]) -> Environment:
    _check_keys(e, ("image", "files", "tools"), "environment.")
    files = _need(e, "files", Mapping, "environment.", {})
    for k, v in files.items():
        if not isinstance(v, str):
            raise FieldError(f"environment.files.{k}", f"expected file text, got {type(v).__name__}")
    tools = _need(e, "tools", list, "environment.", [])
    for i, t in enumerate(tools):
        if not isinstance(t, str):
            raise FieldError(f"environment.tools[{i}]", "expected a tool name")
    return Environment(_need(e, "image", str, "environment.", "host"), dict(files), tuple(tools))


def _limits(lim: Mapping[str, Any]) -> Limits:
    _check_keys(lim, ("max_steps", "max_new_tokens", "timeout_s"), "limits.")
    d = Limits()
    steps = _need(lim, "max_steps", int, "limits.", d.max_steps)
    toks = _need(lim, "max_new_tokens", int, "limits.", d.max_new_tokens)
    timeout = _need(lim, "timeout_s", (int, float), "limits.", d.timeout_s)
    for k, v in (("max_steps", steps), ("max_new_tokens", toks), ("timeout_s", timeout)):
        if v <= 0:
            raise FieldError(f"limits.{k}", f"must be > 0, got {v}")
    return Limits(steps, toks, float(timeout))


def task_from_dict(d: Any) -> Task:
    """Validate one task object; raises FieldError naming the bad field."""
    if not isinstance(d, Mapping):
        raise FieldError("", f"expected a task object, got {_short(d)}")
    _check_keys(d, _TASK_KEYS, "")
    prompt = _need(d, "prompt", list, "")
    if not prompt:
        raise FieldError("prompt", "must hold at least one message")
    oracle = d.get("oracle")
    if oracle is not None and not isinstance(oracle, str):
        raise FieldError("oracle", f"expected a string or null, got {type(oracle).__name__}")
    return Task(
        id=_need(d, "id", str, ""),
        domain=_need(d, "domain", str, ""),
        prompt=tuple(_message(m, f"prompt[{i}]") for i, m in enumerate(prompt)),
        verifier=spec_from_obj(_need(d, "verifier", (str, Mapping), "")),
        difficulty=float(_need(d, "difficulty", (int, float), "", 0.0)),
        environment=_environment(_need(d, "environment", Mapping, "", {})),
        limits=_limits(_need(d, "limits", Mapping, "", {})),
        metadata=dict(_need(d, "metadata", Mapping, "", {})),
        oracle=oracle,
    )


def parse_jsonl(path: str | Path, row: Callable[[Any], Task] = task_from_dict) -> list[Task]:
    """One object per non-blank line, each turned into a Task by `row`."""
    p = Path(path)
    out = []
    for lineno, line in enumerate(_read(p).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise TaskFileError(f"{p}:{lineno}: invalid JSON at column {e.colno}: {e.msg}") from None
        try:
            out.append(row(obj))
        except FieldError as e:
            raise TaskFileError(f"{p}:{lineno}: field {e.path!r}: {e.msg}") from None
    return out


def _read(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFileError(f"{p.resolve()}: no such task file") from None  # resolved: says where it looked
    except (OSError, UnicodeDecodeError) as e:
        raise TaskFileError(f"{p}: cannot read task file: {e}") from None


def _yaml_lines(node: Any, path: str, out: dict[str, int]) -> None:
    """Map each dotted field path under `node` to its 1-based source line."""
    import yaml

    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            sub = f"{path}.{k.value}" if path else str(k.value)
            out[sub] = k.start_mark.line + 1
            _yaml_lines(v, sub, out)
            out[sub] = k.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _yaml_lines(v, f"{path}[{i}]", out)


def parse_yaml(path: str | Path, row: Callable[[Any], Task] = task_from_dict) -> list[Task]:
    """A YAML list of tasks (or one task mapping, or `{tasks: [...]}`)."""
    import yaml

    p = Path(path)
    text = _read(p)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        raise TaskFileError(f"{p}:{line}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if data is None:
        return []
    prefix = ""
    if isinstance(data, Mapping) and "tasks" in data and set(data) == {"tasks"}:
        data, prefix = data["tasks"], "tasks"
    items, paths = (data, [f"{prefix}[{i}]" for i in range(len(data))]) if isinstance(data, list) else ([data], [prefix])
    lines: dict[str, int] = {}
    _yaml_lines(root, "", lines)
    out = []
    for item, base in zip(items, paths):
        try:
            out.append(row(item))
        except FieldError as e:
            full = ".".join(x for x in (base, e.path) if x).replace(".[", "[")
            key = full
            while key and key not in lines:  # nearest enclosing node with a known line
                key = key.rsplit(".", 1)[0] if "." in key else key.rsplit("[", 1)[0] if "[" in key else ""
            raise TaskFileError(f"{p}:{lines.get(key, 1)}: field {e.path!r}: {e.msg}") from None
    return out


def load_tasks(path: str | Path, allow_empty: bool = False) -> list[Task]:
    """Tasks from a .jsonl, .json (one object per line) or .yaml/.yml file. A file with no task
    is refused, naming it (a user's empty file would otherwise pass every check and crash a run
    later); a run's own pinned splits, which may be empty (sft.jsonl), pass allow_empty=True."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".yaml", ".yml"):
        tasks = parse_yaml(p)
    elif suffix in (".jsonl", ".json"):
        tasks = parse_jsonl(p)
    else:
        raise TaskFileError(f"{p}: unknown task file type {suffix!r} (use .jsonl, .yaml or .yml)")
    if not tasks and not allow_empty:
        raise TaskFileError(f"{p.resolve()}: no tasks in this file (empty); a task file needs at least one task")
    seen: dict[str, int] = {}
    for i, t in enumerate(tasks):
        if t.id in seen:
            raise TaskFileError(f"{p}: task {i + 1}: field 'id': duplicate id {t.id!r} (first at task {seen[t.id] + 1})")
        seen[t.id] = i
    if any(m.attachments for t in tasks for m in t.prompt):  # image files live beside the task file
        from posttrain.tasks.images import add_search_root

        add_search_root(p.parent)
    return tasks


def save_tasks(tasks: Iterable[Task], path: str | Path) -> Path:
    """Write tasks as JSONL or YAML (chosen by suffix); returns the path."""
    p = Path(path)
    tasks = list(tasks)
    rows = [task_to_dict(t) for t in tasks]
    p.parent.mkdir(parents=True, exist_ok=True)
    if any(m.attachments for t in tasks for m in t.prompt):  # bytes as files beside the task file, not inline
        from posttrain.tasks.images import export_attachments

        export_attachments(tasks, p.parent)
    suffix = p.suffix.lower()
    if suffix in (".yaml", ".yml"):
        import yaml

        p.write_text(yaml.safe_dump(rows, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8")
    elif suffix in (".jsonl", ".json"):
        p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    else:
        raise TaskFileError(f"{p}: unknown task file type {suffix!r} (use .jsonl, .yaml or .yml)")
    return p
