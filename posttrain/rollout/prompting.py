"""Turn task messages into prompt token ids through the tokenizer's own chat template."""

from __future__ import annotations

from typing import Any, Sequence

from posttrain.types import Message


def to_chat(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def encode_prompt(tokenizer: Any, messages: Sequence[Message]) -> tuple[int, ...]:
    """Chat-templated ids ending with the assistant generation prompt: the ids
    `apply_chat_template(..., add_generation_prompt=True)` gives (the template's own BOS and
    special-token text included, nothing added on top; tests/unit/rollout/test_real_tokenizers.py)."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(f"tokenizer {type(tokenizer).__name__} has no chat template")
    text = tokenizer.apply_chat_template(to_chat(messages), add_generation_prompt=True, tokenize=False)
    return tuple(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_completion(tokenizer: Any, answer: str) -> tuple[int, ...]:
    """Ids of an assistant answer as the model would emit it: text, then the token the chat
    template closes an assistant turn with (EOS when the template names none; they differ
    for e.g. Llama 3, Gemma and Qwen base models)."""
    from posttrain.rollout.tokenizer_checks import end_of_turn_id

    end = end_of_turn_id(tokenizer)
    return tuple(tokenizer(answer, add_special_tokens=False)["input_ids"]) + (
        tokenizer.eos_token_id if end is None else end,)
