"""Import Harbor / Terminal-Bench task folders as `terminal` tasks.

A folder holds `task.toml`, `instruction.md`, `tests/test.sh` (which writes the reward
to `/logs/verifier/reward.txt`), optionally `solution/solve.sh` (becomes the oracle) and
`environment/` (its files, except the Dockerfile, become the starting workspace).

    tasks = load_harbor_tasks("path/to/tasks")   # one folder, or a folder of folders

With `environment/Dockerfile` the image is built (`sandbox/rootfs_build.py`: every RUN,
COPY, WORKDIR, ENV, USER line reproduced on a Debian base; cached by recipe), the task
names that image, the episode runs on a throwaway overlay of it with the workspace at
its WORKDIR, and `image_test` runs tests/test.sh there afterwards; paths stay as written.
A line that cannot be reproduced is a TaskFileError naming it, unless
`allow_unreproducible=True` (the line is skipped and listed in the task's metadata).
`environment="host"` keeps the older import: the task runs on the sandbox's host image
with /app, /tests, /solution, /logs/verifier rewritten to the workspace, and the
Dockerfile lines it does not carry out are warned about (HarborImportWarning).
Without a Dockerfile the host import is used.
"""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path
from typing import Any

from posttrain.errors import TaskFileError
from posttrain.tasks.plan import dump_plan
from posttrain.types import Environment, Limits, Message, Spec, Task

WORKDIR = "/work"  # the sandbox's workspace directory, where a Harbor container's paths are mapped


def rewrite_harbor_paths(text: str) -> str:
    """Map a Harbor container's absolute paths onto the sandbox workspace."""
    for src, dst in (("/logs/verifier", f"{WORKDIR}/logs/verifier"), ("/tests", f"{WORKDIR}/tests"),
                     ("/solution", f"{WORKDIR}/solution"), ("/app", WORKDIR)):
        text = re.sub(rf"(?<![\w./-]){re.escape(src)}(?=$|[/\s\"';:)])", dst, text, flags=re.MULTILINE)
    return text

# The system message of every Harbor task: how to call the shell, shown by example (the task's only tool
# besides the session built-ins). Without it a model has to guess the call syntax.
SYSTEM = ("You are in a shell in the task's working directory. Run a command by writing exactly\n"
          '<tool_call>{"name": "shell", "arguments": {"cmd": "ls -la"}}</tool_call>\n'
          "and nothing after it; its output comes back as the next message. Files, the working directory and "
          "the environment persist between calls. When the task is done, reply with the single word: done")

_DIFFICULTY = {"easy": 1.0, "medium": 2.0, "hard": 3.0}
MAX_FILE = 1 << 20


class HarborImportWarning(UserWarning):
    """A part of a Harbor task that the import does not reproduce (a Dockerfile's RUN lines)."""


# Dockerfile instructions the sandbox reproduces (or that change nothing a test can see).
_HARMLESS = ("FROM", "WORKDIR", "LABEL", "MAINTAINER", "CMD", "ENTRYPOINT", "EXPOSE", "ARG", "#")


def unreproduced_dockerfile_lines(path: Path) -> list[str]:
    """The instructions of a Dockerfile that a sandbox on the host image does not carry out."""
    if not path.is_file():
        return []
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8", errors="replace"))  # join continued lines
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().upper().startswith(_HARMLESS)]


def _text_files(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if not p.is_file() or rel in skip:
            continue
        if p.stat().st_size > MAX_FILE:
            raise TaskFileError(f"{p}: file over {MAX_FILE} bytes; harbor import holds text files only")
        try:
            out[rel] = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise TaskFileError(f"{p}: not UTF-8 text; harbor import holds text files only") from None
    return out


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskFileError(f"{path}: missing (a Harbor task folder needs task.toml)") from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise TaskFileError(f"{path}:{m.group(1) if m else 1}: invalid TOML: {e}") from None


def _field(d: dict, path: Path, dotted: str, typ: type | tuple[type, ...], default: Any) -> Any:
    cur: Any = d
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    if not isinstance(cur, typ) or isinstance(cur, bool):
        want = typ.__name__ if isinstance(typ, type) else "number"
        raise TaskFileError(f"{path}: field {dotted!r}: expected {want}, got {type(cur).__name__}")
    return cur


def _built_image(dockerfile: Path, allow_unreproducible: bool) -> tuple[str, list[str]]:
    from posttrain.errors import SandboxError
    from posttrain.sandbox.rootfs_build import build_rootfs

    try:
        img = build_rootfs(dockerfile, allow_unreproducible)
    except SandboxError as e:
        raise TaskFileError(str(e)) from None
    import json

    return img.digest, list(json.loads(img.manifest.read_text()).get("skipped_unreproducible", []))


def load_harbor_task(folder: str | Path, environment: str = "build", allow_unreproducible: bool = False) -> Task:
    """One Harbor task folder -> Task. environment: "build" (the Dockerfile's image) or "host"."""
    if environment not in ("build", "host"):
        raise TaskFileError(f"harbor import: environment={environment!r} must be 'build' or 'host'")
    root = Path(folder)
    meta = _toml(root / "task.toml")
    instruction = root / "instruction.md"
    if not instruction.is_file():
        raise TaskFileError(f"{instruction}: missing (a Harbor task folder needs instruction.md)")
    if not (root / "tests" / "test.sh").is_file():
        raise TaskFileError(f"{root / 'tests' / 'test.sh'}: missing (a Harbor task folder needs tests/test.sh)")
    toml_path = root / "task.toml"
    diff = _field(meta, toml_path, "metadata.difficulty", str, "medium")
    timeout = float(_field(meta, toml_path, "verifier.timeout_sec", (int, float), 120.0))
    agent_timeout = float(_field(meta, toml_path, "agent.timeout_sec", (int, float), 600.0))
    dockerfile = root / "environment" / "Dockerfile"
    if environment == "build" and dockerfile.is_file():
        return _image_task(root, meta, toml_path, dockerfile, allow_unreproducible, diff, timeout, agent_timeout)
    env = _text_files(root / "environment", skip=("Dockerfile",)) if (root / "environment").is_dir() else {}
    dropped = unreproduced_dockerfile_lines(root / "environment" / "Dockerfile")
    if dropped:
        warnings.warn(f"harbor task {root.name}: {len(dropped)} Dockerfile line(s) are not reproduced (tasks run on the "
                      f"sandbox's host image): {'; '.join(dropped[:3])}{' ...' if len(dropped) > 3 else ''}",
                      HarborImportWarning, stacklevel=2)
    solve = root / "solution" / "solve.sh"
    oracle = None
    if solve.is_file():
        oracle = dump_plan([{"tool": "shell", "arguments": {"cmd": rewrite_harbor_paths(solve.read_text(encoding="utf-8"))}}, {"answer": "done"}])
    text = rewrite_harbor_paths(instruction.read_text(encoding="utf-8"))
    tests = {k: rewrite_harbor_paths(v) if k.endswith(".sh") else v for k, v in _text_files(root / "tests").items()}
    return Task(
        id=f"harbor-{root.name}", domain="terminal",
        prompt=(Message("system", SYSTEM), Message("user", text)),
        verifier=Spec("harbor_test", {"tests": tests, "wall_s": timeout}),
        difficulty=_DIFFICULTY.get(diff, 2.0), environment=Environment(image="host", files=env, tools=("shell",)),
        limits=Limits(max_steps=50, max_new_tokens=1024, timeout_s=agent_timeout),
        metadata={"source": "harbor", "folder": str(root), "difficulty_label": diff, "needs_sandbox": True,
                  "unreproduced_dockerfile": dropped,
                  "category": _field(meta, toml_path, "metadata.category", str, "")},
        oracle=oracle,
    )


def solution_steps(script: str, reference_steps: int) -> list[str]:
    """solve.sh as shell steps: its `# ---`-separated blocks when task.toml says there are
    `reference_steps` of them, else the whole script as one. Each runs in its own bash (an
    `exit` or `set -e` in it cannot end the session's shell)."""
    body = "\n".join(ln for ln in script.splitlines() if not ln.startswith("#!"))
    blocks = [b.strip("\n") for b in re.split(r"^# ---$", body, flags=re.MULTILINE) if b.strip()]
    if reference_steps <= 0 or len(blocks) != reference_steps:
        blocks = [body.strip("\n")]
    return [f"bash <<'PT_STEP'\n{b}\nPT_STEP" for b in blocks]


def _image_task(root: Path, meta: dict, toml_path: Path, dockerfile: Path, allow_unreproducible: bool, diff: str,
                timeout: float, agent_timeout: float) -> Task:
    digest, skipped = _built_image(dockerfile, allow_unreproducible)
    steps = _field(meta, toml_path, "metadata.reference_steps", int, 0)
    solve = root / "solution" / "solve.sh"
    oracle = None
    if solve.is_file():
        oracle = dump_plan([{"tool": "shell", "arguments": {"cmd": c}} for c in solution_steps(solve.read_text(encoding="utf-8"), steps)]
                           + [{"answer": "done"}])
    return Task(
        id=f"harbor-{root.name}", domain="terminal",
        prompt=(Message("system", SYSTEM),
                Message("user", (root / "instruction.md").read_text(encoding="utf-8"))),
        verifier=Spec("image_test", {"tests": _text_files(root / "tests"), "wall_s": timeout}),
        difficulty=_DIFFICULTY.get(diff, 2.0), environment=Environment(image=digest, files={}, tools=("shell",)),
        limits=Limits(max_steps=int(_field(meta, toml_path, "agent.max_steps", int, 50)), max_new_tokens=1024, timeout_s=agent_timeout),
        metadata={"source": "harbor", "folder": str(root), "difficulty_label": diff, "needs_sandbox": True,
                  "image": digest, "skipped_dockerfile_lines": skipped, "reference_steps": steps or None,
                  "category": _field(meta, toml_path, "metadata.category", str, "")},
        oracle=oracle,
    )


def load_harbor_tasks(path: str | Path, environment: str = "build", allow_unreproducible: bool = False) -> list[Task]:
    """One task folder, or every immediate subfolder holding a task.toml."""
    root = Path(path)
    if not root.is_dir():
        raise TaskFileError(f"{root}: not a directory of Harbor tasks")
    if (root / "task.toml").exists():
        return [load_harbor_task(root, environment, allow_unreproducible)]
    folders = sorted(p for p in root.iterdir() if (p / "task.toml").is_file())
    if not folders:
        raise TaskFileError(f"{root}: no task.toml here or in any subfolder")
    return [load_harbor_task(p, environment, allow_unreproducible) for p in folders]
