"""Vision fixtures: a private image cache per test and one tiny VLM per session."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _image_dir(tmp_path, monkeypatch, one_torch_thread):
    """Attachments written by a test go to its own folder, never ~/.cache; one intra-op thread."""
    monkeypatch.setenv("POSTTRAIN_IMAGE_DIR", str(tmp_path / "image-cache"))


@pytest.fixture(scope="session")
def vlm():
    from posttrain.models.vlm import build_tiny_vlm

    model, tok = build_tiny_vlm(seed=0)
    return model.eval(), tok


def make_tasks(name: str, n: int = 6, seed: int = 0, difficulty: float = 1.0, size: int = 32):
    from posttrain.registry import build

    return build(name, kind="domain", size=size).generate(n, seed, difficulty)
