"""Turn task messages into prompt token ids through the tokenizer's own chat template."""

from __future__ import annotations

from typing import Any, Sequence

from posttrain.types import Message


def to_chat(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def encode_prompt(tokenizer: Any, messages: Sequence[Message]) -> tuple[int, ...]:
    """Chat-templated ids ending with the assistant generation prompt."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(f"tokenizer {type(tokenizer).__name__} has no chat template")
    text = tokenizer.apply_chat_template(to_chat(messages), add_generation_prompt=True, tokenize=False)
    return tuple(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_completion(tokenizer: Any, answer: str) -> tuple[int, ...]:
    """Ids of an assistant answer as the model would emit it: text then EOS."""
    return tuple(tokenizer(answer, add_special_tokens=False)["input_ids"]) + (tokenizer.eos_token_id,)
