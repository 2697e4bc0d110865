"""Tiny GGUF files written with the `gguf` package's GGUFWriter (a small random Llama),
shared by the GGUF conversion tests (each test module skips itself without `gguf`)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    """(path, source model) of an fp32 tiny Llama GGUF with a ChatML chat template."""
    from posttrain.testing.gguf_tiny import write_tiny_gguf

    path = tmp_path_factory.mktemp("gguf") / "tiny-f32.gguf"
    return path, write_tiny_gguf(path)


@pytest.fixture(scope="session")
def tiny_gguf_q8(tmp_path_factory):
    """(path, source model holding the dequantised weights) of a Q8_0 tiny Llama GGUF."""
    from posttrain.testing.gguf_tiny import write_tiny_gguf

    path = tmp_path_factory.mktemp("gguf") / "tiny-q8.gguf"
    return path, write_tiny_gguf(path, quantise=True, seed=1)
