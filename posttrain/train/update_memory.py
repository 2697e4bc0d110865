"""How many tokens the RL update runs at once: `rl.micro_tokens: auto` (the default).

    limit = micro_token_limit(model, cfg.micro_tokens)   # 0: the minibatch in one pass

Backward holds every layer's activations and, for each completion token, its [vocab] logits and
their log-softmax, so the update's memory grows with the tokens it runs at once: SmolLM2-135M
with LoRA held 2.0-2.6 MB a token (benchmarks/update_memory.py), and the faster-learning seed of the
TRL side-by-side, whose steps kept more groups, peaked 1.3 GiB above the others. `auto` cuts
each minibatch into micro-batches (whole groups, train/update.py `micro_batches`) whose
estimated activations fit `update_budget_bytes()`: one pass for a small model, 412 tokens for
SmolLM2, 288 for Gemma 3 270M (its 262k vocabulary). An int keeps its meaning: N tokens, 0 = no
limit.

The estimate is a per-token float count from the model's shape, set a little above what
benchmarks/update_memory.py measures on SmolLM2 (peak RSS of real updates of 2-8 groups):
    layers x (16 x hidden + 6 x intermediate)    norms, q/k/v/o, rotary, attention output, the MLP
    + 2 x vocab                                    a completion token's logits and log-softmax
"""

from __future__ import annotations

import os
from typing import Any

# CPU: at most 1 GiB, and no more than an eighth of the machine's memory (a laptop keeps room for
# the engine's weights and KV lanes). An accelerator: a quarter of its memory. 1 GiB, not 2: on 2 CPU
# threads a pass of ~400 tokens runs the matmuls as fast as one of ~800, so halving the pass halved the
# update's memory (SmolLM2, 8 groups of 8 x 40 tokens under bf16 autocast: 1.32 -> 0.65 GiB) for 0.4 s of
# a 7.5 s update (benchmarks/update_memory.py --groups 8 --micro auto 400 --precision bf16 --completion 40,
# 2026-12-07), and the TRL side-by-side's peak is this pass plus what the engine and trainer hold.
CPU_BUDGET_BYTES = 1 << 30
CPU_RAM_SHARE = 8
DEVICE_SHARE = 4


def _text_config(model: Any) -> Any:
    cfg = getattr(model, "config", None)
    return getattr(cfg, "text_config", None) or cfg


def activation_bytes_per_token(model: Any) -> int:
    """Estimated bytes the update holds per token of `model` (fp32 activations); 0 if its
    config does not name its shape (no limit is then derived)."""
    c = _text_config(model)
    try:
        layers, hidden = int(c.num_hidden_layers), int(c.hidden_size)
        inter, vocab = int(getattr(c, "intermediate_size", 4 * hidden)), int(c.vocab_size)
    except (AttributeError, TypeError):
        return 0
    return 4 * (layers * (16 * hidden + 6 * inter) + 2 * vocab)


def update_budget_bytes(device: str = "cpu") -> int:
    """The activation memory `auto` allows one micro-batch on `device`."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_properties(device).total_memory // DEVICE_SHARE
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(CPU_BUDGET_BYTES, ram // CPU_RAM_SHARE)


def micro_token_limit(model: Any, micro_tokens: int | str) -> int:
    """`rl.micro_tokens` as a token count for `model`: an int as given; `auto` from the model's
    shape and the device's memory (0, no limit, when the shape is unknown)."""
    if micro_tokens != "auto":
        return int(micro_tokens)
    per = activation_bytes_per_token(model)
    if per <= 0:
        return 0
    try:
        device = str(next(model.parameters()).device)
    except (AttributeError, StopIteration):
        device = "cpu"
    return max(1, update_budget_bytes(device) // per)
