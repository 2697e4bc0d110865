"""The `fast` engine's CPU fp32 decode hot path as a small C library.

    plan = DecodePlan(rows, length, lanes, cap, src, shared, order)   # once per step
    o = plan.run(qkv, cos, sin, kc, vc, heads)                        # once per layer
    act = silu_mul(gu); tok, lp = sample_rows(logits, temp, seed, sample, pos, stream, cols)

Why: at 512 decoding sequences, `matmul` + softmax + `matmul` over the lanes reads every
lane's keys and values at the lanes' full capacity (a narrower slice is a strided batch,
which `bmm` copies first: measured 2.3x slower), each small batched product pays a fixed
cost, and the ops around it (rotary, the KV `index_put`, the sampler's hash) pay theirs.

- `DecodePlan.run` applies the rotary embedding to the fused q|k|v projection, writes
  each row's new keys and values into its lane, and attends over exactly each row's
  visible positions. It reads a GRPO group's shared prompt from one lane and visits the
  group's rows one after another, so the prompt's keys come from cache for all but the
  first: cascade attention done by visiting order instead of a second KV layout, so
  prefill, compaction and speculation keep the dense lanes. Up to 16 new tokens per row
  (decode, speculative verification).
- `silu_mul`: SiLU(gate) * up in one pass over the fused gate|up output.
- `sample_rows`: Gumbel-max with sampling.py's counter-based noise (same draws), for rows
  without top-k/top-p.

The C source, cpu_kernels.c, is compiled once per machine with the system C compiler
(`cc -O3 -march=native -fopenmp`) into ~/.cache/posttrain/kernels/ (POSTTRAIN_CACHE
overrides the root; the key includes the CPU's identity), loaded with ctypes, and called
on tensors' data pointers. No compiler, a failed build, or POSTTRAIN_NO_KERNELS=1 ->
`available()` is False and the engine uses its tensor path; results agree to float
rounding (tests/unit/rollout/test_cpu_kernels.py).

Numerics follow HF's eager attention in fp32: scores q.k * D^-0.5, softmax in fp32 with
the max subtracted, then the probability-weighted sum of values; exp and log are
polynomials (relative error ~1e-7) so that their loops vectorise.
"""


from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

_SOURCE = (Path(__file__).with_name("cpu_kernels.c")).read_text()  # the C library's source

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_error: str | None = None
_I64, _F32 = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_float)


def _cache_dir() -> Path:
    root = os.environ.get("POSTTRAIN_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "posttrain")
    return Path(root) / "kernels"


def _cpu_identity() -> str:
    """The CPU's model and feature flags (Linux), else what `platform` knows."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags", "Features", "CPU part"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.machine() + platform.processor()


def _build() -> ctypes.CDLL:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc/gcc) on PATH")
    flags = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-ffp-contract=fast", "-shared", "-fPIC", "-std=c99"]
    # -march=native code is only valid on this CPU: the key includes its identity, so a cache
    # directory shared between machines (a network home) never hands one a foreign build
    key = hashlib.sha256((_SOURCE + " ".join(flags) + cc + _cpu_identity()).encode()).hexdigest()[:16]
    out = _cache_dir() / f"cpu_kernels_{key}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:  # build aside, then rename: no torn .so
            src = Path(tmp) / "k.c"
            src.write_text(_SOURCE)
            so = Path(tmp) / "k.so"
            r = subprocess.run([cc, *flags, str(src), "-o", str(so), "-lm"], capture_output=True, text=True,
                               timeout=120)
            if r.returncode != 0:
                raise RuntimeError(f"{cc} failed: {r.stderr.strip()[:500]}")
            os.replace(so, out)
    lib = ctypes.CDLL(str(out))
    fn = lib.decode_attention
    fn.argtypes = [_F32, _F32, _F32, ctypes.c_int64, _F32, _F32, _I64, _I64, _I64, _I64, _I64, _F32] + [
        ctypes.c_int64] * 6 + [
        ctypes.c_float, ctypes.c_int64, ctypes.c_int]
    fn.restype = ctypes.c_int
    lib.sample_rows.argtypes = [_F32, _F32, _I64, _I64, _I64, ctypes.c_int64, _I64, ctypes.c_int64, ctypes.c_int64,
                                _I64, _F32, ctypes.c_int]
    lib.sample_rows.restype = ctypes.c_int
    lib.silu_mul.argtypes = [_F32, _F32, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
    lib.silu_mul.restype = None
    return lib


def available() -> bool:
    """True when the kernel is built and loaded (built on first call; False, once, on failure)."""
    global _lib, _error
    if _lib is not None:
        return True
    if _error is not None or os.environ.get("POSTTRAIN_NO_KERNELS") == "1":
        return False
    with _lock:
        if _lib is None and _error is None:
            try:
                _lib = _build()
            except Exception as e:  # noqa: BLE001 - any build/load failure means: use the torch path
                _error = f"{type(e).__name__}: {e}"
    return _lib is not None


def build_error() -> str | None:
    """Why the kernel is unavailable (None when it loaded or was not tried)."""
    return _error


def _ptr(t: torch.Tensor, kind: type) -> ctypes._Pointer:
    return ctypes.cast(t.data_ptr(), kind)


class DecodePlan:
    """One decode step's row bookkeeping, checked once and shared by every layer's call.

    rows [B]: each query row's lane (distinct); length [B]: positions its first query sees
    (0..length-1, the last being its first new one); src [B]:
    the lane that holds positions < shared[B] (default: the row's own lane, shared 0);
    order [B]: the visiting order (default: sorted by src, so rows reading one prompt run
    back to back and find it in cache). All int64, on CPU.
    """

    def __init__(self, rows: torch.Tensor, length: torch.Tensor, lanes: int, cap: int,
                 src: torch.Tensor | None = None, shared: torch.Tensor | None = None,
                 order: torch.Tensor | None = None) -> None:
        if not available():
            raise RuntimeError(f"decode attention kernel unavailable: {_error}")
        self.rows = rows.to(torch.int64).contiguous()
        self.length = length.to(torch.int64).contiguous()
        self.src = self.rows if src is None else src.to(torch.int64).contiguous()
        self.shared = torch.zeros_like(self.rows) if shared is None else shared.to(torch.int64).contiguous()
        if order is None:
            order = torch.argsort(self.src, stable=True) if src is not None else torch.arange(len(self.rows))
        self.order = order.to(torch.int64).contiguous()
        B = len(self.rows)
        if not (len(self.length) == len(self.src) == len(self.shared) == len(self.order) == B):
            raise ValueError("decode_attention: rows, length, src, shared and order differ in length")
        if B and (int(self.length.min()) < 1 or int(self.length.max()) > cap or int(self.rows.min()) < 0
                  or int(torch.maximum(self.rows, self.src).max()) >= lanes or int(self.src.min()) < 0):
            raise ValueError(f"decode_attention: a row's lane or visible length is outside {lanes} lanes of {cap}")
        if B and torch.unique(self.rows).numel() != B:  # rows write their lanes in parallel
            raise ValueError("decode_attention: two rows share a lane")
        self.cap, self.lanes = cap, lanes
        self.longest = int(self.length.max()) if B else 0
        self._ptrs = [_ptr(x, _I64) for x in (self.rows, self.length, self.src, self.shared, self.order)]

    def run(self, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor,
            heads: int, scale: float | None = None, window: int = 0) -> torch.Tensor:
        """Attention output [B, T, heads * D] from the fused projection qkv [B, T, (heads + 2 kvh) D]
        (before the rotary embedding; cos, sin [max_pos, D] are the model's tables). Each row's
        T new keys (rotated) and values go into its lane at positions length-1 .. length+T-2;
        query t (rotated) sees positions < length + t, only the last `window` of them when
        window > 0 (a sliding-window layer). Scores are q.k * scale (default D ** -0.5).
        kc, vc: one layer's lanes [lanes, kvh, cap, D]. All fp32, contiguous."""
        B, T, W = qkv.shape
        _, kvh, cap, D = kc.shape
        ok = all(t.dtype == torch.float32 and t.is_contiguous() for t in (qkv, cos, sin, kc, vc))
        if not (ok and tuple(kc.shape) == tuple(vc.shape) == (self.lanes, kvh, self.cap, D) and heads % kvh == 0
                and W == (heads + 2 * kvh) * D and B == len(self.rows) and D <= 256
                and cos.shape == sin.shape and cos.shape[-1] == D):
            raise ValueError(f"decode_attention: fp32 contiguous qkv {tuple(qkv.shape)} for {heads} heads, rotary "
                             f"tables {tuple(cos.shape)} and lanes {tuple(kc.shape)} matching the plan "
                             f"({len(self.rows)} rows, {self.lanes} lanes of {self.cap}, head size <= 256) expected")
        if B and self.longest + T - 1 > self.cap:
            raise ValueError(f"decode_attention: {T} new positions after {self.longest - 1} overrun lanes of {self.cap}")
        out = torch.empty(B, T, heads * D, dtype=torch.float32)
        rc = _lib.decode_attention(_ptr(qkv, _F32), _ptr(cos, _F32), _ptr(sin, _F32), cos.shape[0], _ptr(kc, _F32),
                                   _ptr(vc, _F32), *self._ptrs, _ptr(out, _F32), B, T, kvh, heads // kvh, self.cap, D,
                                   float(D) ** -0.5 if scale is None else float(scale), int(window),
                                   torch.get_num_threads())
        if rc:
            raise MemoryError("decode_attention: could not allocate the score buffer")
        return out


def sample_rows(logits: torch.Tensor, temperature: torch.Tensor, seed: torch.Tensor, sample: torch.Tensor,
                pos: torch.Tensor, stream: int, cols: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens [B] (int64) and raw logprobs [B] for fp32 logits [B, V]: Gumbel-max at each row's
    temperature [B] (0 = argmax) with the noise of sampling.uniforms(row_keys(seed, sample,
    pos, stream), V), whose per-column keys are cols [V]. No top-k / top-p: sampling.sample
    warps in torch first."""
    if not available():
        raise RuntimeError(f"CPU kernels unavailable: {_error}")
    B, V = logits.shape
    x = logits.contiguous()
    if x.dtype != torch.float32 or x.device.type != "cpu" or cols.shape != (V,) \
            or not all(t.shape == (B,) for t in (temperature, seed, sample, pos)):
        raise ValueError(f"sample_rows: CPU fp32 logits [B, V] with [B] temperatures, seeds, sample indices and "
                         f"positions and [V] column keys expected, got logits {tuple(x.shape)}")
    t = temperature.to(torch.float32).contiguous()
    ints = [a.to(torch.int64).contiguous() for a in (seed, sample, pos, cols)]
    tok = torch.empty(B, dtype=torch.int64)
    lp = torch.empty(B, dtype=torch.float32)
    rc = _lib.sample_rows(_ptr(x, _F32), _ptr(t, _F32), *(_ptr(a, _I64) for a in ints[:3]), int(stream),
                          _ptr(ints[3], _I64), B, V, _ptr(tok, _I64), _ptr(lp, _F32), torch.get_num_threads())
    if rc:
        raise MemoryError("sample_rows: could not allocate the column-key buffer")
    return tok, lp


def silu_mul(gu: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up for the fused projection gu [..., 2I] (fp32, contiguous) -> [..., I]."""
    if not available():
        raise RuntimeError(f"CPU kernels unavailable: {_error}")
    if gu.dtype != torch.float32 or not gu.is_contiguous() or gu.device.type != "cpu" or gu.shape[-1] % 2:
        raise ValueError(f"silu_mul: contiguous CPU fp32 [..., 2I] expected, got {gu.dtype} {tuple(gu.shape)}")
    inter = gu.shape[-1] // 2
    out = torch.empty(*gu.shape[:-1], inter, dtype=torch.float32)
    _lib.silu_mul(_ptr(gu, _F32), _ptr(out, _F32), gu.numel() // gu.shape[-1], inter, torch.get_num_threads())
    return out
