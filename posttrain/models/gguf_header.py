"""Read a GGUF header (metadata + tensor table) without touching the tensor data.

GGUF v2/v3 layout (little-endian): b"GGUF", u32 version, u64 tensor count, u64 kv count,
the kv pairs (string key, u32 type, value), then per tensor (string name, u32 n_dims,
u64 dims[n_dims], u32 ggml type, u64 offset), padding to `general.alignment` (32), data.

Why not `gguf.GGUFReader`: it builds a numpy view per array element (seconds for a 262k-token
vocabulary), and on a truncated file it fails with a numpy reshape error instead of saying
which tensor is cut. Here large arrays are skipped (only their length is kept) and every
read is bounds-checked, so a short or corrupt file raises `GGUFHeaderError` with the offset.

Limits: little-endian files only (what llama.cpp writes on every common machine); array
values are returned as `ArrayInfo(type, count)`, except string arrays of at most
`keep_strings` items, whose values are kept.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# GGUF value type -> struct format of its fixed-size scalar.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32


class GGUFHeaderError(ValueError):
    """The header is truncated or malformed; the message gives the byte offset."""


@dataclass(frozen=True)
class ArrayInfo:
    type: int
    count: int


@dataclass(frozen=True)
class TensorExtent:
    name: str
    ggml_type: int
    n_elements: int
    start: int  # absolute byte offset of the data
    end: int  # one past the last byte


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    fields: dict[str, Any]
    tensors: list[TensorExtent]
    data_offset: int


class _Cursor:
    def __init__(self, buf: Any) -> None:
        self.buf, self.pos, self.size = buf, 0, len(buf)

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.size:
            raise GGUFHeaderError(f"header ends early: needed {n} bytes at offset {self.pos}, file has {self.size}")

    def scalar(self, fmt: str) -> Any:
        n = struct.calcsize(fmt)
        self.need(n)
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return v

    def string(self) -> str:
        n = self.scalar("<Q")
        self.need(n)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        n = self.scalar("<Q")
        self.need(n)
        self.pos += n

    def value(self, vtype: int, keep_strings: int) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype != _ARRAY:
            raise GGUFHeaderError(f"unknown value type {vtype} at offset {self.pos}")
        item, count = self.scalar("<I"), self.scalar("<Q")
        if item in _SCALARS:
            n = struct.calcsize(_SCALARS[item]) * count
            self.need(n)
            self.pos += n
            return ArrayInfo(item, count)
        if item == _STRING:
            if count <= keep_strings:
                return [self.string() for _ in range(count)]
            for _ in range(count):
                self.skip_string()
            return ArrayInfo(item, count)
        raise GGUFHeaderError(f"unsupported array item type {item} at offset {self.pos}")


def read_header(path: str | Path, quant_sizes: dict[int, tuple[int, int]], keep_strings: int = 64) -> GGUFHeader:
    """The parsed header. `quant_sizes[ggml type] = (block size, bytes per block)` (from
    `gguf.GGML_QUANT_SIZES`); a tensor of a type not in it raises GGUFHeaderError."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        c = _Cursor(buf)
        if bytes(buf[:4]) != b"GGUF":
            raise GGUFHeaderError("magic is not GGUF")
        c.pos = 4
        version = c.scalar("<I")
        if version not in (2, 3):
            raise GGUFHeaderError(f"GGUF version {version} (only 2 and 3 are read; a big-endian file reads as a huge number)")
        n_tensors, n_kv = c.scalar("<Q"), c.scalar("<Q")
        # each kv pair / tensor entry takes > 8 bytes: bigger counts than that are a corrupt header
        if n_kv * 8 > c.size or n_tensors * 8 > c.size:
            raise GGUFHeaderError(f"counts ({n_tensors} tensors, {n_kv} keys) do not fit in {c.size} bytes")
        fields: dict[str, Any] = {}
        for _ in range(n_kv):
            key = c.string()
            fields[key] = c.value(c.scalar("<I"), keep_strings)
        entries = []
        for _ in range(n_tensors):
            name = c.string()
            n_dims = c.scalar("<I")
            if n_dims > 8:
                raise GGUFHeaderError(f"tensor {name!r} has {n_dims} dimensions at offset {c.pos}")
            dims = [c.scalar("<Q") for _ in range(n_dims)]
            entries.append((name, dims, c.scalar("<I"), c.scalar("<Q")))
        align = fields.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            raise GGUFHeaderError(f"general.alignment {align!r} is not a power of two")
        data = c.pos + (-c.pos % align)
    tensors = []
    for name, dims, gtype, offset in entries:
        if gtype not in quant_sizes:
            raise GGUFHeaderError(f"tensor {name!r} has unknown ggml type {gtype}")
        n = 1
        for d in dims:
            n *= d
        block, type_size = quant_sizes[gtype]
        start = data + offset
        tensors.append(TensorExtent(name, gtype, n, start, start + n * type_size // block))
    return GGUFHeader(version=version, fields=fields, tensors=tensors, data_offset=data)
