"""Rule-based constraints applied before any verifier: the answer must be well formed.

A completion that is empty, not valid UTF-8 (decoded with replacement characters), cut
off by the token budget, or spread over several lines fails the format rule and scores
0 with that reason, without calling the verifier. These are properties of the model's
output, so they are scored, never treated as infrastructure errors.
"""

from __future__ import annotations

from posttrain.types import Trajectory


def format_violation(traj: Trajectory, single_line: bool = True, max_chars: int = 2000) -> str | None:
    """The reason the completion breaks the format rule, or None if it is well formed."""
    text = traj.completion_text
    if traj.finish_reason == "length":
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
