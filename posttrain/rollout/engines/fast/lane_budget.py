"""The `fast` engine's KV-lane budget: how long and how many decode lanes a call needs, and
cutting a call into phases that each fit `kv_mb`.

A mixin of `FastEngine` (engine.py), which sets what these methods read: `max_batch`,
`max_len`, `kv_token_bytes`, `kv_bytes`, `spec`, `lm`, `lanes`, `_static_opts`, `_static`.
`_ensure_lanes` (re)allocates `lanes` (and the CUDA-graph decoder, the speculator's buffers)
for a phase; serve/loop.py calls it directly to allocate the server's lanes up front.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

from posttrain.rollout.engine import GenRequest


class LaneBudget:
    """`_need`, `_lane_bytes`, `_phases`, `_ensure_lanes` of `FastEngine`."""

    def _need(self, r: GenRequest) -> int:
        """Lane positions a sample of `r` can fill: prompt, new tokens, and the speculator's lookahead."""
        slack = (self.spec.lookahead + 1) if self.spec is not None else 1
        return min(len(r.prompt_ids) + r.params.max_new_tokens, self.max_len) + slack

    def _lane_bytes(self, n: int, cap: int) -> int:
        """K and V of `n` lanes of `cap` positions (what `kv_mb` bounds)."""
        return n * cap * self.kv_token_bytes

    def _phases(self, requests: Sequence[GenRequest], queue: deque) -> list[deque]:
        """The queue cut into phases that each fit the KV budget at full batch, run one after the other.

        Lanes are dense and share one length (kv_cache.py says why), so a single 2,600-token
        prompt among 300-token ones would size all max_batch lanes to it: 64 x 2,800 tokens of
        SmolLM2 K/V is 8 GiB. Requests are taken shortest first; a phase closes when its lanes,
        min(max_batch, samples) x the longest need, would pass `kv_mb`. One queue that fits is
        one phase, in its own order; a request that alone does not fit runs with fewer lanes."""
        if not queue:
            return []
        need = {w.req: self._need(requests[w.req]) for w in queue}

        def fits(ws: list) -> bool:
            n = min(self.max_batch, sum(len(w.samples) for w in ws))
            return self._lane_bytes(n, max(need[w.req] for w in ws)) <= self.kv_bytes

        if fits(list(queue)):
            return [queue]
        phases, cur = [], []
        for w in sorted(queue, key=lambda w: need[w.req]):
            if cur and not fits(cur + [w]):
                phases.append(deque(cur))
                cur = []
            cur.append(w)
        return phases + [deque(cur)]

    def _ensure_lanes(self, requests: Sequence[GenRequest], queue: deque) -> None:
        """Lanes for `queue`: as many as it has samples (at most max_batch, and at most what fits
        `kv_mb` at its longest need), reused when the current ones cover that within the budget."""
        need_len = max(self._need(requests[w.req]) for w in queue)
        fit = max(1, self.kv_bytes // self._lane_bytes(1, need_len))
        need_n = min(self.max_batch, sum(len(w.samples) for w in queue), fit)
        if self.lanes is None or self.lanes.n < need_n or self.lanes.cap < need_len:
            n, cap = need_n, need_len
            if self.lanes is not None:  # grow rather than shrink, while the grown lanes fit the budget
                gn, gcap = max(n, self.lanes.n), max(cap, self.lanes.cap)
                if self._lane_bytes(gn, gcap) <= self.kv_bytes:
                    n, cap = gn, gcap
            self.lanes = None  # free the old lanes before allocating: never both at once
            if self._static_opts:
                from posttrain.rollout.engines.fast.cuda import StaticDecoder, bucket

                n = bucket(n, 1 << 30)
            self.lanes = self.lm.new_lanes(n, cap)
            if self._static_opts:
                self._static = StaticDecoder(self, compile=self.lm.device.type == "cuda")
            if self.spec is not None:
                self.spec.resize(n, cap)
