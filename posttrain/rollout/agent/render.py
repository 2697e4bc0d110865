"""Token-level rendering of an agent conversation through the tokenizer's chat template.

    codec = ChatCodec(tokenizer)
    text = codec.reply_text(completion.token_ids)        # markers kept, EOS dropped
    ids = codec.observation_ids("4517277", ended=True)   # tool turn + next assistant header
    short = truncate("x" * 10**8, 2000)                  # head + marker + tail

The observation's ids are found by rendering a probe conversation with and without a
tool message and keeping the difference, so any chat template (the tiny model's
`<|tool|>...<|end|><|assistant|>`, Qwen's `<|im_start|>tool ...`) renders its own
framing; the model's end-of-turn token closes the assistant turn before it. A reply cut
by the token limit (no end of turn) gets the end-of-turn token prepended, so the training
sequence equals the sequence the model continued from.

Limits: assumes the template renders earlier messages the same way whatever follows
(true of the usual append-only chat templates); raises ValueError when it does not.
"""

from __future__ import annotations

from typing import Any, Sequence

_SENTINEL = "\x00PT_OBS\x00"


def truncate(text: str, max_chars: int) -> str:
    """`text` cut to about `max_chars`: its head and tail around a marker saying how much went."""
    if len(text) <= max_chars:
        return text
    head = max(0, (max_chars * 2) // 3)
    tail = max(0, max_chars - head)
    cut = len(text) - head - tail
    return f"{text[:head]}\n...[truncated {cut} chars]...\n{text[len(text) - tail:] if tail else ''}"


class ChatCodec:
    def __init__(self, tokenizer: Any) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(f"tokenizer {type(tokenizer).__name__} has no chat template")
        from posttrain.rollout.tokenizer_checks import end_of_turn_id

        self.tok = tokenizer
        eos, end = tokenizer.eos_token_id, end_of_turn_id(tokenizer)
        # what closes an assistant turn: the template's end-of-turn token (Llama 3, Gemma, a
        # Qwen base model: not the EOS), else the EOS
        self.eos_id = eos if end is None else end
        self.eos_text = (tokenizer.eos_token or "") if end is None else tokenizer.convert_ids_to_tokens(end)
        self.skip = {i for i in (eos, self.eos_id, tokenizer.pad_token_id) if i is not None}
        self.obs_prefix, self.obs_suffix = self._probe()

    def _render(self, msgs: list[dict[str, str]], gen: bool) -> str:
        return self.tok.apply_chat_template(msgs, add_generation_prompt=gen, tokenize=False)

    def _probe(self) -> tuple[str, str]:
        base = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
        before = self._render(base, False)
        after = self._render(base + [{"role": "tool", "content": _SENTINEL}], True)
        at = before.rfind("a") + 1  # end of the assistant's content
        if not after.startswith(before[:at]) or not before[at:].startswith(self.eos_text):
            raise ValueError("chat template does not render earlier turns independently of later ones")
        delta = after[at + len(self.eos_text):]  # what follows the assistant's EOS
        if _SENTINEL not in delta:
            raise ValueError("chat template drops tool messages")
        pre, post = delta.split(_SENTINEL, 1)
        return pre, post

    def encode(self, text: str) -> tuple[int, ...]:
        return tuple(self.tok(text, add_special_tokens=False)["input_ids"])

    def reply_text(self, token_ids: Sequence[int]) -> str:
        """The reply as text with tool-call markers kept (special tokens other than EOS/pad)."""
        return self.tok.decode([t for t in token_ids if t not in self.skip], skip_special_tokens=False)

    def observation_ids(self, text: str, ended: bool) -> tuple[int, ...]:
        """Ids of one tool observation plus the next assistant header (mask 0 in the loss)."""
        lead = "" if ended else self.eos_text
        return self.encode(lead + self.obs_prefix + text + self.obs_suffix)

    def assistant_ids(self, text: str) -> tuple[int, ...]:
        """Ids of an assistant reply as the model emits it: text then EOS (for demonstrations)."""
        return self.encode(text) + ((self.eos_id,) if self.eos_id is not None else ())
