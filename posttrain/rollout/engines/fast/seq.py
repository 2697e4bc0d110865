"""Per-sequence state of the `fast` engine and its finish rules (EOS, length, stop, deadline)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from posttrain.rollout.engine import Completion, SamplingParams


@dataclass
class Seq:
    """One running sample. Its lane holds KV for tokens[:pos]; `last` is not in KV yet."""

    req: int  # index of the request in the generate() call
    sample: int  # index within the request's n
    request_id: str
    prompt: tuple[int, ...]
    params: SamplingParams
    seed: int
    deadline: float | None  # absolute time.monotonic()
    max_new: int  # params.max_new_tokens clipped to the context
    pos: int = 0
    last: int = -1
    draft_pos: int = 0  # KV length in the draft model's lane (speculative decoding)
    out: list[int] = field(default_factory=list)
    lps: list[float] = field(default_factory=list)
    reason: str = ""
    spec: Any = None  # speculator's per-sequence state (the n-gram index)
    kv_group: int = -1  # sequences admitted from one prefill row share bit-identical prompt KV
    images: bool = False  # its prompt holds image features: never written to the token-keyed store
    # (index into out, weights version) at admission and at each in-flight weight update after it
    vsplits: list[tuple[int, int]] = field(default_factory=list)

    def token_versions(self) -> tuple[int, ...]:
        """The weights version each token of `out` was sampled under."""
        bounds = [i for i, _ in self.vsplits[1:]] + [len(self.out)]
        return tuple(v for (i, v), end in zip(self.vsplits, bounds) for _ in range(max(0, min(end, len(self.out)) - i)))

    @property
    def tokens(self) -> list[int]:
        return list(self.prompt) + self.out

    @property
    def length(self) -> int:
        return len(self.prompt) + len(self.out)


class Finisher:
    """Applies the finish rules to newly emitted tokens and renders Completions."""

    def __init__(self, tokenizer: Any, eos_ids: set[int]) -> None:
        self.tok = tokenizer
        self.eos = eos_ids

    def push(self, s: Seq, toks: list[int], lps: list[float], now: float) -> bool:
        """Append emitted tokens to `s` until a rule fires; True when the sequence is done."""
        if len(toks) == 1 and not s.params.stop:  # the common decode case, kept cheap
            t = toks[0]
            s.out.append(t)
            s.lps.append(lps[0])
            if t in self.eos:
                s.reason = "stop"
            elif len(s.out) >= s.max_new:
                s.reason = "length"
            elif s.deadline is not None and now >= s.deadline:
                s.reason = "deadline"
            return bool(s.reason)
        for t, lp in zip(toks, lps):
            s.out.append(t)
            s.lps.append(lp)
            if t in self.eos:
                s.reason = "stop"
            elif len(s.out) >= s.max_new:
                s.reason = "length"
            elif s.params.stop and self._hit_stop(s):
                s.reason = "stop"
            if s.reason:
                return True
        if s.deadline is not None and now >= s.deadline:
            s.reason = "deadline"
            return True
        return False

    def _hit_stop(self, s: Seq) -> bool:
        """Does the tail of the output contain a stop string? Decodes a short window only."""
        width = max(len(x) for x in s.params.stop) + 4  # every token is >= 1 char or a special token
        tail = self.tok.decode(s.out[-width:], skip_special_tokens=True)
        return any(x in tail for x in s.params.stop)

    def render(self, s: Seq) -> Completion:
        """Completion with text without EOS and cut before the first stop string."""
        text = self.tok.decode([t for t in s.out if t not in self.eos], skip_special_tokens=True)
        cuts = [text.index(x) for x in s.params.stop if x in text]
        if cuts:
            text = text[: min(cuts)]
        return Completion(s.request_id, s.sample, tuple(s.out), tuple(s.lps), text, s.reason or "length",
                          token_versions=s.token_versions())
