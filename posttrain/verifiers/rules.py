"""Rule-based constraints applied before any verifier: the answer must be well formed.

A completion that is empty, not valid UTF-8 (decoded with replacement characters), cut
off by the token budget, or longer than the task's rule allows fails the format rule and
scores 0 with that reason, without calling the verifier. These are properties of the
model's output, so they are scored, never treated as infrastructure errors.

The rule is per domain (`rule_for(task)`), because what "well formed" means differs:
- CODE (the verifier runs the answer as a program: `humaneval`, `python_tests`): any
  number of lines, ```python fences and whole function definitions are real code, and
  programs are longer than answers (16,000 characters, about 4,000 tokens).
- TEXT (the verifier parses a multi-line answer: labelled lines with citations, a JSON
  document that may be pretty-printed; or a multi-step episode): several lines, 2,000
  characters per step (the whole episode's assistant text is checked at once).
- LINE (every other one-step task: arithmetic, math, needle...): one line, 2,000
  characters. The answer is a number or a phrase; a second line is the model running on.
- LONG (named only: worked solutions and essays, `math500`, `aime`, `ifbench`): any number
  of lines, 32,000 characters (a few thousand tokens of reasoning before the answer).
A task can name its rule with `metadata["answer_format"]` ("line", "code", "text" or "long");
otherwise the `answer_format` each verifier its spec names declared where it registered
(`@verifier("python_tests", answer_format="code")`; composites declare "inner" and their
inner verifiers decide), then its step budget decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from posttrain.registry import registry
from posttrain.types import Spec, Task, Trajectory


@dataclass(frozen=True)
class FormatRule:
    single_line: bool
    max_chars: int


CODE = FormatRule(single_line=False, max_chars=16000)
LONG = FormatRule(single_line=False, max_chars=32000)
PER_STEP_CHARS = 2000


def verifier_names(spec: Any) -> set[str]:
    """Every verifier a spec names, inner ones of composites (weighted, gate...) included."""
    names: set[str] = set()
    stack = [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, Spec):
            names.add(node.name)
            stack.append(node.args)
        elif isinstance(node, Mapping):
            if isinstance(node.get("name"), str):
                names.add(node["name"])
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return names


def declared_formats(spec: Any) -> set[str]:
    """The `answer_format`s the verifiers named in `spec` declared ("line", "code", "text", ...).
    A name no verifier registered (an argument that happens to be called `name`) declares nothing."""
    reg = registry("verifier")
    return {reg.props(n)["answer_format"] for n in verifier_names(spec) if n in reg.names()}


_CACHE: dict[str, FormatRule] = {}


def rule_for(task: Task) -> FormatRule:
    """The format rule of `task`'s domain (see the module doc), memoised by task version:
    walking a spec costs time in proportion to its arguments, on every judged answer."""
    rule = _CACHE.get(task.version)
    if rule is None:
        if len(_CACHE) >= 4096:
            _CACHE.clear()
        rule = _CACHE[task.version] = _rule_for(task)
    return rule


def _rule_for(task: Task) -> FormatRule:
    steps = max(1, task.limits.max_steps)
    text = FormatRule(single_line=False, max_chars=PER_STEP_CHARS * steps)
    named = task.metadata.get("answer_format")
    if named in ("line", "code", "text", "long"):
        return {"line": FormatRule(True, PER_STEP_CHARS), "code": CODE, "text": text, "long": LONG}[named]
    declared = declared_formats(task.verifier)
    if "code" in declared:
        return CODE
    if "text" in declared or steps > 1:
        return text
    return FormatRule(single_line=True, max_chars=PER_STEP_CHARS)


def format_violation(traj: Trajectory, single_line: bool = True, max_chars: int = 2000,
                     truncated_fails: bool = True) -> str | None:
    """The reason the completion breaks the format rule, or None if it is well formed.
    `truncated_fails=False` (rl.overlong: score / soft_penalty) lets an answer cut off by the
    token budget through to the verifier; the other rules still hold."""
    text = traj.completion_text
    if traj.finish_reason == "length" and truncated_fails:
        return "unterminated: hit the token budget before the end-of-turn token"
    if not text.strip():
        return "empty completion"
    if "\ufffd" in text:
        return "not valid UTF-8"
    if len(text) > max_chars:
        return f"longer than {max_chars} characters"
    if single_line and "\n" in text.strip():
        return "more than one line"
    return None


def task_format_violation(task: Task, traj: Trajectory, truncated_fails: bool = True) -> str | None:
    """`format_violation` under `task`'s own rule: what the RL loop and eval apply."""
    rule = rule_for(task)
    return format_violation(traj, single_line=rule.single_line, max_chars=rule.max_chars,
                            truncated_fails=truncated_fails)


def episode_format_violation(task: Task, traj: Trajectory, max_steps: int) -> str | None:
    """The rule for an agent episode of up to `max_steps` turns: several lines always (one
    per turn at least), and the domain's length budget or 2,000 characters per step."""
    rule = rule_for(task)
    return format_violation(traj, single_line=False, max_chars=max(rule.max_chars, PER_STEP_CHARS * max(1, max_steps)))
