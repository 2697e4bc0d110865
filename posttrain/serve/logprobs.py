"""Logprob payloads in OpenAI's shapes, and the top-k alternatives the sampler does not keep.

The engine returns, per generated token, log p(token | prefix) at temperature 1 (the
quantity RL trains on): that is the `logprob` of each entry. `top_logprobs` needs the
whole distribution at each position, which the decode step does not keep; it is computed
by one teacher-forced forward of prompt + completion through the engine's own model
(`top_alternatives`, run on the engine loop thread), so the alternatives agree with the
sampled token's logprob to float rounding.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch


def top_alternatives(eng: Any, prompt: Sequence[int], completion: Sequence[int], k: int
                     ) -> list[list[tuple[int, float]]]:
    """Per completion token, the k most likely tokens and their logprobs at that position."""
    if k <= 0 or not completion:
        return [[] for _ in completion]
    lm = eng.lm
    ids = list(prompt) + list(completion)
    lanes = lm.new_lanes(1, len(ids))
    with torch.inference_mode():
        h = lm.forward(torch.tensor([ids], device=lm.device), torch.zeros(1, dtype=torch.long, device=lm.device),
                       lanes, fused=False)  # [1, L, H]
        lp = lm.logits(h[0, len(prompt) - 1:len(ids) - 1]).float().log_softmax(-1)  # [C, V]
        vals, idx = lp.topk(min(k, lp.shape[-1]), dim=-1)
    return [list(zip(i, v)) for i, v in zip(idx.tolist(), vals.tolist())]


def _entry(fmt: Any, t: int, lp: float) -> dict[str, Any]:
    s = fmt.token_text(t)
    return {"token": s, "logprob": lp, "bytes": list(s.encode("utf-8"))}


def chat_logprobs(fmt: Any, ids: Sequence[int], lps: Sequence[float], tops: Sequence[Sequence[tuple[int, float]]] | None
                  ) -> dict[str, Any]:
    """{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]} (chat completions)."""
    out = []
    for j, (t, lp) in enumerate(zip(ids, lps)):
        e = _entry(fmt, t, lp)
        e["top_logprobs"] = [_entry(fmt, a, b) for a, b in tops[j]] if tops else []
        out.append(e)
    return {"content": out}


def completion_logprobs(fmt: Any, ids: Sequence[int], lps: Sequence[float],
                        tops: Sequence[Sequence[tuple[int, float]]] | None, offset0: int = 0) -> dict[str, Any]:
    """{"tokens", "token_logprobs", "top_logprobs", "text_offset"} (legacy completions)."""
    tokens = [fmt.token_text(t) for t in ids]
    offsets, at = [], offset0
    for s in tokens:
        offsets.append(at)
        at += len(s)
    top = [{fmt.token_text(a): b for a, b in tops[j]} for j in range(len(ids))] if tops else None
    return {"tokens": tokens, "token_logprobs": list(lps), "top_logprobs": top, "text_offset": offsets}
