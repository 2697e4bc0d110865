"""The GGUF header reader on hand-built and cut files: every malformed byte string raises
GGUFHeaderError (never IndexError, MemoryError or a hang), and a good header reads exactly."""

from __future__ import annotations

import struct

import pytest

gguf = pytest.importorskip("gguf", reason="needs the gguf package: make install (pip install gguf==0.19.0)")

from posttrain.models.gguf_header import ArrayInfo, GGUFHeaderError, read_header

SIZES = {int(k): v for k, v in gguf.GGML_QUANT_SIZES.items()}


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _file(tmp_path, body: bytes, n_tensors=0, n_kv=0, version=3):
    p = tmp_path / "h.gguf"
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv) + body)
    return p


def test_reads_the_tiny_writer_output_exactly(tiny_gguf):
    h = read_header(tiny_gguf[0], SIZES)
    assert h.fields["general.architecture"] == "llama"
    assert h.fields["tokenizer.ggml.tokens"] == ArrayInfo(8, 263)  # 3 special + 256 bytes + 4 merges
    r = gguf.GGUFReader(tiny_gguf[0])  # the reference reader agrees on every tensor's place
    assert [(t.name, t.start, t.end - t.start) for t in h.tensors] == \
           [(t.name, t.data_offset, t.n_bytes) for t in r.tensors]


def test_every_prefix_of_a_real_header_raises_header_error(tiny_gguf, tmp_path):
    data = tiny_gguf[0].read_bytes()
    header_end = read_header(tiny_gguf[0], SIZES).data_offset
    for cut in range(4, header_end - 1, 97):
        p = tmp_path / f"cut{cut}.gguf"
        p.write_bytes(data[:cut])
        with pytest.raises(GGUFHeaderError):
            read_header(p, SIZES)


def test_string_longer_than_the_file_is_refused_without_allocating(tmp_path):
    p = _file(tmp_path, struct.pack("<Q", 2**62) + b"key", n_kv=1)
    with pytest.raises(GGUFHeaderError, match="header ends early"):
        read_header(p, SIZES)


def test_absurd_counts_are_refused_before_looping(tmp_path):
    p = _file(tmp_path, b"", n_tensors=2**40, n_kv=1)
    with pytest.raises(GGUFHeaderError, match="do not fit"):
        read_header(p, SIZES)


def test_huge_fixed_size_array_is_bounds_checked(tmp_path):
    body = _s("a") + struct.pack("<IIQ", 9, 4, 2**50)  # array of 2**50 u32
    with pytest.raises(GGUFHeaderError, match="header ends early"):
        read_header(_file(tmp_path, body, n_kv=1), SIZES)


def test_unknown_value_type_is_refused(tmp_path):
    with pytest.raises(GGUFHeaderError, match="unknown value type 99"):
        read_header(_file(tmp_path, _s("a") + struct.pack("<I", 99), n_kv=1), SIZES)


def test_big_endian_or_future_version_is_refused(tmp_path):
    with pytest.raises(GGUFHeaderError, match="version"):
        read_header(_file(tmp_path, b"", version=3 << 24), SIZES)


def test_non_power_of_two_alignment_is_refused(tmp_path):
    body = _s("general.alignment") + struct.pack("<II", 4, 24)
    with pytest.raises(GGUFHeaderError, match="power of two"):
        read_header(_file(tmp_path, body, n_kv=1), SIZES)


def test_unknown_ggml_type_names_the_tensor(tmp_path):
    body = _s("w") + struct.pack("<IQIQ", 1, 4, 250, 0)
    with pytest.raises(GGUFHeaderError, match="tensor 'w' has unknown ggml type 250"):
        read_header(_file(tmp_path, body, n_tensors=1), SIZES)


def test_tensor_extent_uses_the_quant_block_size(tmp_path):
    q8 = int(gguf.GGMLQuantizationType.Q8_0)
    body = _s("w") + struct.pack("<IQQIQ", 2, 64, 3, q8, 0)
    h = read_header(_file(tmp_path, body, n_tensors=1), SIZES)
    (t,) = h.tensors
    assert t.n_elements == 192 and t.end - t.start == 192 // 32 * 34  # Q8_0: 32 values in 34 bytes
    assert t.start % 32 == 0
