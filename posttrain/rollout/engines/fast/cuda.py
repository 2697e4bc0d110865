"""Static-shape decode for CUDA graphs: bucketed batch, fixed key width, compiled step.

CUDA graphs replay a fixed sequence of kernels on fixed buffers, so the decode step must
see the same shapes every time: the batch is padded up to a power-of-two bucket (the
padding rows decode into free lanes, whose KV no live sequence reads) and attention reads
the lanes' full capacity with a mask instead of the running maximum length. Each bucket
is compiled once (`torch.compile(mode="reduce-overhead")`, which captures and replays a
CUDA graph), and the sampler is compiled so its hash/Gumbel/argmax chain fuses into a few
kernels. With `compile=False` the same padded path runs eagerly, which is how the CPU
tests check that padding changes nothing.

Limits: a bucket's first use pays compilation (tens of seconds on a 24-layer model);
reading the full capacity costs bandwidth when sequences are much shorter than it.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import torch

from posttrain.rollout.engines.fast.sampling import sample

log = logging.getLogger(__name__)


def bucket(n: int, limit: int) -> int:
    b = 8
    while b < n:
        b *= 2
    return min(b, limit)


class StaticDecoder:
    def __init__(self, eng: Any, compile: bool = True) -> None:
        self.eng = eng
        self.compile = compile
        self._fns: dict[int, Callable] = {}
        self._sample = torch.compile(sample, dynamic=True) if compile else sample

    def _fn(self, b: int) -> Callable:
        if b not in self._fns:
            lm, lanes = self.eng.lm, self.eng.lanes

            def step(tokens: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
                return lm.logits(lm.forward(tokens, start, lanes, 0, width=lanes.cap)[:, 0])  # [b, V]

            self._fns[b] = torch.compile(step, mode="reduce-overhead", dynamic=False) if self.compile else step
        return self._fns[b]

    def sample(self, *args: Any) -> Any:
        try:
            return self._sample(*args)
        except Exception as e:  # noqa: BLE001  a compiler failure must not stop generation
            log.warning("compiled sampler failed (%s: %s); sampling eagerly", type(e).__name__, e)
            self._sample = sample
            return sample(*args)

    def logits(self, tokens: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        """tokens [n, 1], start [n] -> logits [n, V], computed at the bucket size."""
        n = tokens.shape[0]
        b = bucket(n, self.eng.lanes.n)
        if b > n:
            tokens = torch.cat([tokens, tokens.new_zeros(b - n, 1)])
            start = torch.cat([start, start.new_zeros(b - n)])
        try:
            out = self._fn(b)(tokens, start)
        except Exception as e:  # noqa: BLE001  fall back to the same padded step, eagerly
            if not self.compile:
                raise
            log.warning("compiled decode step failed (%s: %s); running it eagerly", type(e).__name__, e)
            self.compile = False
            self._fns.clear()
            out = self._fn(b)(tokens, start)
        return out[:n].clone()
