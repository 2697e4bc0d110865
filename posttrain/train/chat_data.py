"""Chat training data: JSONL rows -> messages -> token ids with an assistant-only loss mask.

    convs = load_sft_jsonl("data/train.jsonl")          # [(Message, ...), ...]
    ids, mask = encode_conversation(tokenizer, conv)     # mask 1 on assistant tokens

A row is either `{"messages": [{"role": ..., "content": ...}, ...]}` (the last message
from the assistant; every assistant turn is trained on) or the shorthand
`{"prompt": "...", "completion": "..."}`. A bad row is a TaskFileError naming the file,
line and field.

Assistant tokens are found with the tokenizer's own chat template: the template of the
conversation up to assistant turn i (with the generation prompt) must be a token prefix of
the template including turn i; the tokens in between are turn i (content plus its
end-of-turn token). A template for which this does not hold (one that rewrites earlier
turns, e.g. strips reasoning) is a "chat-template mismatch" error naming the row, since an
assistant-only mask cannot be derived from it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from posttrain.errors import TaskFileError
from posttrain.types import Message

ROLES = ("system", "user", "assistant", "tool")
Conversation = tuple[Message, ...]


class ChatTemplateMismatch(TaskFileError):
    """The chat template does not render a conversation as a growing prefix."""


def read_jsonl(path: str | Path) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line; errors name file and line."""
    p = Path(path)
    if not p.is_file():
        raise TaskFileError(f"data file not found: {p}")
    rows = []
    for n, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise TaskFileError(f"{p}:{n}: not valid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise TaskFileError(f"{p}:{n}: each line must be a JSON object, got {type(obj).__name__}")
        rows.append((n, obj))
    if not rows:
        raise TaskFileError(f"{p}: no rows")
    return rows


def parse_messages(raw: Any, where: str, field: str = "messages") -> Conversation:
    if not isinstance(raw, list) or not raw:
        raise TaskFileError(f"{where}: field {field!r} must be a non-empty list of messages")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise TaskFileError(f"{where}: {field}[{i}] needs 'role' (one of {', '.join(ROLES)}) and string 'content'")
        out.append(Message(m["role"], m["content"]))
    return tuple(out)


def row_to_conversation(obj: dict, where: str) -> Conversation:
    if "messages" in obj:
        conv = parse_messages(obj["messages"], where)
    elif "prompt" in obj or "completion" in obj:
        for k in ("prompt", "completion"):
            if not isinstance(obj.get(k), str):
                raise TaskFileError(f"{where}: missing or non-string field {k!r}")
        conv = (Message("user", obj["prompt"]), Message("assistant", obj["completion"]))
    else:
        raise TaskFileError(f"{where}: row needs 'messages' or 'prompt' + 'completion'; has {sorted(obj)}")
    if conv[-1].role != "assistant":
        raise TaskFileError(f"{where}: the last message must be from the assistant (the training target)")
    return conv


def load_sft_jsonl(path: str | Path) -> list[Conversation]:
    return [row_to_conversation(obj, f"{path}:{n}") for n, obj in read_jsonl(path)]


def _render(tok: Any, msgs: Sequence[Message], gen_prompt: bool) -> list[int]:
    chat = [{"role": m.role, "content": m.content} for m in msgs]
    text = tok.apply_chat_template(chat, add_generation_prompt=gen_prompt, tokenize=False)
    return list(tok(text, add_special_tokens=False)["input_ids"])


def encode_conversation(tok: Any, conv: Sequence[Message], where: str = "conversation") -> tuple[list[int], list[int]]:
    """(ids, mask): the whole templated conversation; mask 1 on assistant-turn tokens."""
    if getattr(tok, "chat_template", None) is None:
        raise ChatTemplateMismatch(f"{where}: tokenizer {type(tok).__name__} has no chat template")
    ids: list[int] = []
    mask: list[int] = []
    for i, m in enumerate(conv):
        if m.role != "assistant":
            continue
        prefix = _render(tok, conv[:i], gen_prompt=True)
        full = _render(tok, conv[:i + 1], gen_prompt=False)
        if full[:len(prefix)] != prefix or prefix[:len(ids)] != ids:
            raise ChatTemplateMismatch(f"{where}: chat-template mismatch: rendering assistant turn {i} changes the "
                                       f"tokens before it, so the assistant-only loss mask is undefined")
        mask += [0] * (len(prefix) - len(ids)) + [1] * (len(full) - len(prefix))
        ids = full
    return ids, mask


def encode_all(tok: Any, convs: Sequence[Conversation], source: str = "data") -> list[tuple[list[int], list[int]]]:
    return [encode_conversation(tok, c, f"{source} row {i + 1}") for i, c in enumerate(convs)]
