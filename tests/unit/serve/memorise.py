"""A tiny model that has memorised a few replies, so tests can drive real tool calls.

    model, tok = memorised_tiny([(prompt_ids, reply_ids), ...])

The built-in tiny Llama (random init, seed 0) is fitted on the given (prompt, reply)
pairs until greedy decoding reproduces every reply token; the `fast` engine then emits
exactly those replies at temperature 0. Fitting takes about two seconds on one core.
"""

from __future__ import annotations

from typing import Sequence

import torch


def memorised_tiny(pairs: Sequence[tuple[Sequence[int], Sequence[int]]], steps: int = 400, lr: float = 3e-3):
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(seed=0)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    W = max(len(p) + len(r) for p, r in pairs)
    ids = torch.full((len(pairs), W), tok.pad_token_id)
    labels = torch.full((len(pairs), W), -100)
    for i, (p, r) in enumerate(pairs):
        seq = list(p) + list(r)
        ids[i, : len(seq)] = torch.tensor(seq)
        labels[i, len(p): len(seq)] = torch.tensor(list(r))
    model.train()
    for step in range(steps):
        out = model(input_ids=ids, labels=labels)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        with torch.no_grad():
            pred = out.logits[:, :-1].argmax(-1)
            mask = labels[:, 1:] != -100
            if bool((pred[mask] == labels[:, 1:][mask]).all()) and out.loss.item() < 0.05:
                break
    memorised_tiny.steps = step + 1  # how many steps the last fit took
    model.eval()
    return model, tok
