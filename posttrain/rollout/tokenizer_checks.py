"""What a real tokenizer must get right for RL, found from the tokenizer itself and checked early.

    stops = stop_token_ids(tokenizer, model)     # {EOS, generation_config EOS..., end-of-turn}
    check_oracles_roundtrip(tokenizer, tasks)    # PosttrainError naming the first task that fails

Stop ids: the tokenizer's EOS is not always the token that ends an assistant turn. Llama 3
ends turns with `<|eot_id|>` (EOS `<|end_of_text|>`), Gemma with `<end_of_turn>`, a Qwen
base model with `<|im_end|>` (EOS `<|endoftext|>`); `generation_config.eos_token_id` lists
some of them and the chat template names the rest. Both engines stop on the union, so a
reply never runs past its own end of turn into an invented next turn.

Oracle round trip: SFT demonstrations and the format rule take a task's oracle answer as
text the model can emit. A tokenizer that cannot represent it (an unknown character
becomes `<unk>`, a normaliser rewrites whitespace or Unicode) makes that answer
unreachable and every demonstration a lie; the run stops at start-up with the task named.

Limits: the end-of-turn token is found by rendering a one-exchange probe conversation;
a template that rejects it (e.g. one that requires a system turn of a fixed form) yields
no end-of-turn id, and the EOS set alone is used.
"""

from __future__ import annotations

import weakref
from typing import Any, Iterable

from posttrain.errors import PosttrainError

_PROBE_REPLY = "\x01pt-reply\x01"


class TokenizerCheckError(PosttrainError):
    """A task answer the tokenizer cannot reproduce; the message names the task and the tokenizer."""


_EOT_CACHE: "weakref.WeakKeyDictionary[Any, tuple[str, int | None]]" = weakref.WeakKeyDictionary()


def end_of_turn_id(tokenizer: Any) -> int | None:
    """The special token the chat template puts right after an assistant reply, or None."""
    template = getattr(tokenizer, "chat_template", None)
    if not isinstance(template, str):
        return None
    hit = _EOT_CACHE.get(tokenizer)
    if hit is None or hit[0] != template:  # called per demonstration: probe once per tokenizer and template
        hit = _EOT_CACHE[tokenizer] = (template, _probe_end_of_turn(tokenizer))
    return hit[1]


def _probe_end_of_turn(tokenizer: Any) -> int | None:
    msgs = [{"role": "user", "content": "u"}, {"role": "assistant", "content": _PROBE_REPLY}]
    try:
        text = tokenizer.apply_chat_template(msgs, tokenize=False)
        at = text.rfind(_PROBE_REPLY)
        after = text[at + len(_PROBE_REPLY):] if at >= 0 else ""
        ids = list(tokenizer(after, add_special_tokens=False)["input_ids"]) if after else []
    except Exception:  # noqa: BLE001  a template (or processor) that refuses the probe: EOS only
        return None
    special = set(getattr(tokenizer, "all_special_ids", ())) | {
        i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if getattr(t, "special", False)}
    return ids[0] if ids and isinstance(ids[0], int) and ids[0] in special else None


def stop_token_ids(tokenizer: Any, model: Any = None) -> set[int]:
    """Token ids that end a generation: EOS, the generation config's EOS ids, the end-of-turn token."""
    out: set[int] = set()
    if tokenizer.eos_token_id is not None:
        out.add(int(tokenizer.eos_token_id))
    gen = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    out.update(int(i) for i in (gen if isinstance(gen, (list, tuple)) else [gen] if gen is not None else []))
    eot = end_of_turn_id(tokenizer)
    if eot is not None:
        out.add(int(eot))
    return out


def roundtrip_text(tokenizer: Any, text: str) -> str:
    """`text` encoded as a completion and decoded the way the engines decode a completion."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return tokenizer.decode(ids, skip_special_tokens=True)


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def check_oracles_roundtrip(tokenizer: Any, tasks: Iterable[Any]) -> int:
    """Raise TokenizerCheckError (one line) at the first task whose oracle does not survive
    encode -> decode; returns how many oracles were checked. Tasks without one are skipped."""
    checked, bad = 0, []
    for t in tasks:
        if t.oracle is None:
            continue
        checked += 1
        back = roundtrip_text(tokenizer, t.oracle)
        if back != t.oracle:
            bad.append((t, back))
    if bad:
        t, back = bad[0]
        i = _first_difference(t.oracle, back)
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise TokenizerCheckError(
            f"task {t.id} (domain {t.domain}): its oracle answer does not survive the tokenizer {name} "
            f"(encode -> decode changes {t.oracle[i:i + 12]!r} at char {i} into {back[i:i + 12]!r}; "
            f"{len(bad)} of {checked} oracles affected): use a model whose tokenizer covers these characters "
            f"or drop the domain")
    return checked
