"""Preallocated, block-paged KV store with prefix hashing, refcounts and LRU eviction.

The store holds KV for token prefixes in fixed blocks of `block_size` tokens, per layer
a [num_blocks, kvh, block_size, D] tensor allocated once. A full block is keyed by the
hash chain of every token up to its end, so two sequences that share a prefix share its
blocks: a GRPO group, the next turn of a conversation, a prompt seen in an earlier call.
Blocks referenced by a pinned conversation have refcount > 0 and are never evicted; the
rest are evicted least-recently-used when the free list runs dry.

Why running sequences read a dense lane (fast_model.Lanes) rather than their blocks: on
CPU, without a paged-attention kernel, gathering each sequence's blocks every decode step
costs several times the attention itself (measured: 8-20 ms vs 1.2 ms per layer at 512
sequences x 96 tokens on 2 cores). So the engine copies a prefix's blocks into a lane
once at admission, decodes in the lane, and writes the finished sequence's full blocks
back. The store is what makes prefill happen once per shared prefix.

Limits: keys use Python's 64-bit tuple hash chained block to block; a collision (p ~
2^-64 per pair) would reuse wrong KV. Only full blocks are cached; the partial tail of a
prompt is recomputed (a group still prefills it once: see fast.py).
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from dataclasses import dataclass

import torch


@dataclass
class StoreStats:
    lookups: int = 0
    lookup_tokens: int = 0  # prompt tokens looked up
    hit_tokens: int = 0  # of those, served from cached blocks
    inserted_blocks: int = 0
    evicted_blocks: int = 0
    full: int = 0  # inserts skipped because every block was pinned

    def as_dict(self) -> dict[str, float]:
        d = dict(self.__dict__)
        d["block_hit_rate"] = self.hit_tokens / self.lookup_tokens if self.lookup_tokens else 0.0
        return d


@dataclass
class _Meta:
    key: int | None = None
    ref: int = 0


def chain_keys(tokens: list[int] | tuple[int, ...], block: int) -> list[int]:
    """Hash-chain key of each full block of `tokens` (key i covers tokens[: (i+1)*block])."""
    keys, h = [], 0
    for i in range(len(tokens) // block):
        h = hash((h, tuple(tokens[i * block:(i + 1) * block])))
        keys.append(h)
    return keys


class PagedStore:
    def __init__(self, layers: int, kv_heads: int, head_dim: int, num_blocks: int, block_size: int,
                 dtype: torch.dtype, device: torch.device) -> None:
        dims = (num_blocks, kv_heads, block_size, head_dim)
        self.k = [torch.zeros(dims, dtype=dtype, device=device) for _ in range(layers)]
        self.v = [torch.zeros(dims, dtype=dtype, device=device) for _ in range(layers)]
        self.block, self.num_blocks = block_size, num_blocks
        self.device = device
        self.stats = StoreStats()
        self.clear()

    def clear(self) -> None:
        """Forget every cached prefix (new weights make all stored KV stale).

        O(blocks used since the last clear), not O(num_blocks): it runs at every weight sync,
        and a store of 10^5 blocks took ~10 ms to re-list."""
        self._by_key: dict[int, int] = {}
        self._meta: defaultdict[int, _Meta] = defaultdict(_Meta)  # only blocks touched since the clear
        self._next = 0  # blocks [_next, num_blocks) have not been handed out since the clear
        self._lru: OrderedDict[int, None] = OrderedDict()  # cached blocks with ref == 0

    # ---- lookup ---------------------------------------------------------------------------
    def lookup(self, tokens: list[int] | tuple[int, ...], limit: int, count: bool = True) -> list[int]:
        """Block ids of the longest cached prefix of `tokens`, at most `limit` tokens long."""
        found = []
        for key in chain_keys(tokens[:limit], self.block):
            b = self._by_key.get(key)
            if b is None:
                break
            found.append(b)
            if b in self._lru:
                self._lru.move_to_end(b)
        if count:
            self.stats.lookups += 1
            self.stats.lookup_tokens += len(tokens)
            self.stats.hit_tokens += len(found) * self.block
        return found

    def pin(self, blocks: list[int]) -> None:
        for b in blocks:
            self._meta[b].ref += 1
            self._lru.pop(b, None)

    def unpin(self, blocks: list[int]) -> None:
        for b in blocks:
            m = self._meta[b]
            m.ref -= 1
            if m.ref == 0 and m.key is not None:
                self._lru[b] = None

    # ---- copies between blocks and lanes -------------------------------------------------
    def to_lane(self, blocks: list[int], lk: list[torch.Tensor], lv: list[torch.Tensor], row: int) -> None:
        """Copy `blocks` into lane `row`, positions [0, len(blocks) * block)."""
        if not blocks:
            return
        idx = torch.tensor(blocks, device=self.device)
        n = len(blocks) * self.block
        for src, dst in zip(self.k + self.v, lk + lv):
            g = src[idx]  # [nb, kvh, bs, D]
            dst[row, :, :n] = g.transpose(0, 1).reshape(g.shape[1], n, g.shape[3])

    def insert(self, tokens: list[int] | tuple[int, ...], lk: list[torch.Tensor], lv: list[torch.Tensor],
               row: int) -> list[int]:
        """Cache every full block of `tokens`, whose KV sits in lane `row`; returns their ids."""
        keys = chain_keys(tokens, self.block)
        ids, new = [], []
        for i, key in enumerate(keys):
            b = self._by_key.get(key)
            if b is None:
                b = self._alloc()
                if b is None:
                    self.stats.full += 1
                    break
                self._by_key[key] = b
                self._meta[b].key = key
                self._lru[b] = None
                new.append((i, b))
            ids.append(b)
        if new:
            pos = torch.tensor([i for i, _ in new], device=self.device)
            dst_ids = torch.tensor([b for _, b in new], device=self.device)
            bs = self.block
            for dst, src in zip(self.k + self.v, lk + lv):
                lane = src[row, :, : len(keys) * bs]  # [kvh, nb*bs, D]
                blocks = lane.reshape(lane.shape[0], len(keys), bs, lane.shape[-1]).transpose(0, 1)
                dst[dst_ids] = blocks[pos]
            self.stats.inserted_blocks += len(new)
        return ids

    def _alloc(self) -> int | None:
        if self._next < self.num_blocks:
            self._next += 1
            return self._next - 1
        if not self._lru:
            return None
        b, _ = self._lru.popitem(last=False)
        self._by_key.pop(self._meta[b].key, None)
        self._meta[b] = _Meta()
        self.stats.evicted_blocks += 1
        return b

    @property
    def cached_blocks(self) -> int:
        return len(self._by_key)
