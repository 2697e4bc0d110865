"""Fused, per-request sampling for the `fast` engine: temperature, top-k, top-p, seeds.

All rows of a batch are sampled in one pass of tensor ops (no per-row Python), each with
its own parameters. Randomness is counter-based: the noise for (seed, sample index,
position, vocabulary id) is an integer hash of those four numbers, so a seeded request
gives the same tokens whatever else is in the batch, on CPU and GPU alike, and no
per-request `torch.Generator` has to be carried around. Sampling is Gumbel-max over the
warped logits, which draws exactly from softmax(warped logits).

Logprobs returned alongside are log_softmax of the *raw* logits (temperature 1, no
warping), the quantity the trainer recomputes (see engine.py).

Limits: the hash (lowbias32, 23-bit uniforms: `unit_floats`) is a statistical RNG, not a
cryptographic one; probabilities below ~1e-7 are sampled at a slightly wrong rate.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch

M32 = 0xFFFFFFFF
STREAM_SAMPLE, STREAM_ACCEPT, STREAM_RESIDUAL, STREAM_DRAFT = 1, 2, 3, 4


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2^32 for x in [0, 2^32), without int64 overflow."""
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & M32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 integer hash (C. Wellons) on int64 tensors holding 32-bit values."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def row_keys(seed: torch.Tensor, sample: torch.Tensor, pos: torch.Tensor, stream: int) -> torch.Tensor:
    """One 32-bit key per row from (seed [B] int64, sample index [B], position [B], stream)."""
    k = mix32((seed & M32) ^ stream)
    k = mix32(k ^ ((seed >> 32) & M32))
    k = mix32(k ^ (sample & M32))
    return mix32(k ^ (pos & M32))


_COLS: dict[tuple[int, str], torch.Tensor] = {}


def _col_keys(width: int, device: torch.device) -> torch.Tensor:
    key = (width, str(device))
    if key not in _COLS:
        _COLS[key] = mix32(torch.arange(width, device=device, dtype=torch.int64) * 0x9E3779B1 & M32)
    return _COLS[key]


def unit_floats(bits: torch.Tensor) -> torch.Tensor:
    """32-bit hashes (int64 tensor) -> fp32 uniforms in (0, 1), never 0 or 1: the top 23 bits b give
    (b + 0.5) / 2^23, which fp32 holds exactly for every b (largest 1 - 2^-24). With 24 bits,
    (2^24 - 1) + 0.5 rounded to 2^24 in fp32: u = 1.0, Gumbel noise -log(-log u) = +inf, and the hashed
    column won whatever its logit (0.29% of draws at a 49,152-token vocabulary, 1.6% at 262,144: the
    sampled token's logprob gave them away). cpu_kernels.c's sample_rows does the same arithmetic."""
    return ((bits >> 9).float() + 0.5) * (1.0 / (1 << 23))


def uniforms(keys: torch.Tensor, width: int) -> torch.Tensor:
    """[B] keys -> [B, width] uniforms in (0, 1), fp32."""
    cols = _col_keys(width, keys.device)
    return unit_floats(mix32(keys[:, None] ^ cols[None]))  # [B, width]


@dataclass
class RowParams:
    """Per-row sampling parameters as tensors (built once per change of the batch)."""

    temperature: torch.Tensor  # [B] fp32, 0 = greedy
    top_p: torch.Tensor  # [B] fp32
    top_k: torch.Tensor  # [B] int64, 0 = off
    seed: torch.Tensor  # [B] int64
    sample: torch.Tensor  # [B] int64 sample index within the request
    needs_warp: bool  # any row with top_p < 1 or top_k > 0
    any_greedy: bool
    all_greedy: bool

    @classmethod
    def build(cls, temps: list[float], top_ps: list[float], top_ks: list[int], seeds: list[int],
              samples: list[int], device: torch.device) -> "RowParams":
        t = torch.tensor(temps, dtype=torch.float32, device=device)
        p = torch.tensor(top_ps, dtype=torch.float32, device=device)
        k = torch.tensor(top_ks, dtype=torch.int64, device=device)
        warp = any(x < 1.0 for x in top_ps) or any(x > 0 for x in top_ks)
        greedy = [x == 0 for x in temps]
        return cls(t, p, k, torch.tensor(seeds, dtype=torch.int64, device=device),
                   torch.tensor(samples, dtype=torch.int64, device=device), warp, any(greedy), all(greedy))

    def select(self, idx: torch.Tensor) -> "RowParams":
        """Rows `idx` ([B'] into this batch), e.g. repeated per speculative position."""
        return RowParams(self.temperature[idx], self.top_p[idx], self.top_k[idx], self.seed[idx],
                         self.sample[idx], self.needs_warp, self.any_greedy, self.all_greedy)


def warp(logits: torch.Tensor, rp: RowParams) -> torch.Tensor:
    """Temperature, top-k then top-p on fp32 logits [B, V]; removed entries are -inf.

    Greedy rows (temperature 0) are scaled by 1 and returned unwarped: callers take argmax.
    """
    t = torch.where(rp.temperature > 0, rp.temperature, torch.ones_like(rp.temperature))
    x = logits / t[:, None]
    if not rp.needs_warp:
        return x
    sx, order = x.sort(dim=-1, descending=True)  # [B, V]
    V = x.shape[-1]
    rank = torch.arange(V, device=x.device)[None]
    k = torch.where(rp.top_k > 0, rp.top_k, torch.full_like(rp.top_k, V))
    drop = rank >= k[:, None]  # top-k
    probs = sx.masked_fill(drop, float("-inf")).softmax(-1)
    before = probs.cumsum(-1) - probs  # mass strictly above each entry
    drop |= before >= rp.top_p[:, None]  # top-p keeps the smallest prefix reaching top_p (>= 1 entry)
    sx = sx.masked_fill(drop, float("-inf"))
    return torch.empty_like(x).scatter_(-1, order, sx)


def sample(logits: torch.Tensor, rp: RowParams, pos: torch.Tensor, stream: int = STREAM_SAMPLE
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens [B] and their raw logprobs [B] from fp32 logits [B, V] at positions pos [B]."""
    if not rp.needs_warp and logits.device.type == "cpu" and logits.dtype == torch.float32 and fused_cpu():
        from posttrain.rollout.engines.fast import cpu_kernels# one pass per row in C: same noise, same draws

        return cpu_kernels.sample_rows(logits, rp.temperature, rp.seed, rp.sample, pos, stream,
                                       _col_keys(logits.shape[-1], logits.device))
    logp = logits.log_softmax(-1)  # [B, V] temperature 1: what the trainer recomputes
    if rp.all_greedy:
        tok = logits.argmax(-1)
    else:
        w = warp(logits, rp)
        gumbel = -torch.log(-torch.log(uniforms(row_keys(rp.seed, rp.sample, pos, stream), logits.shape[-1])))
        tok = (w + gumbel).argmax(-1)
        if rp.any_greedy:
            tok = torch.where(rp.temperature > 0, tok, logits.argmax(-1))
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


_FUSED = {"on": True}  # off inside tensor_path()


def fused_cpu() -> bool:
    """Whether `sample` may use the C sampler (cpu_kernels) for unwarped CPU fp32 rows."""
    if not _FUSED["on"]:
        return False
    from posttrain.rollout.engines.fast import cpu_kernels

    return cpu_kernels.available()


@contextmanager
def tensor_path() -> Iterator[None]:
    """Within the block, `sample` uses its tensor ops even where the C sampler is available
    (tests and benchmarks compare the two). Process-wide: not for concurrent generation."""
    before = _FUSED["on"]
    _FUSED["on"] = False
    try:
        yield
    finally:
        _FUSED["on"] = before


def sample_from_probs(probs: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Draw one index per row of unnormalised non-negative probs [B, V] (exponential race)."""
    e = -torch.log(uniforms(keys, probs.shape[-1]))  # Exp(1) [B, V]
    return (probs / e).argmax(-1)
