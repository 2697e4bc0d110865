"""Image attachments: bad bytes and missing files are one-line ImageErrors; huge images are shrunk."""

from __future__ import annotations

import io

import pytest

from posttrain.tasks import images
from posttrain.tasks.images import MAX_SIDE, ImageError, decode_image, image_bytes, png_bytes, store_image
from posttrain.types import Attachment


def _png(w: int, h: int) -> bytes:
    from PIL import Image

    return png_bytes(Image.new("RGB", (w, h), "red"))


def test_corrupt_bytes_raise_image_error_naming_the_image():
    with pytest.raises(ImageError, match="bad.png: corrupt"):
        decode_image(b"not an image at all", "bad.png")


def test_image_over_the_side_budget_is_shrunk_keeping_aspect():
    img = decode_image(_png(600, 300), "big.png", max_side=200)
    assert img.size == (200, 100)


def test_default_budget_is_stated():
    assert MAX_SIDE == 1024 and decode_image(_png(40, 20), "small.png").size == (40, 20)


def test_decompression_bomb_is_refused_before_decoding(monkeypatch):
    monkeypatch.setattr(images, "MAX_DECODE_PIXELS", 100 * 100)
    with pytest.raises(ImageError, match="exceeds the decode budget"):
        decode_image(_png(200, 200), "bomb.png")


def test_missing_attachment_names_its_path():
    att = Attachment("image", "ab" * 32, "images/nowhere.png")
    with pytest.raises(ImageError, match="images/nowhere.png not found"):
        image_bytes(att)


def test_altered_file_fails_the_sha_check(tmp_path, monkeypatch):
    att = store_image(_png(8, 8))
    images._MEM.pop(att.sha256)
    cached = tmp_path / "image-cache" / f"{att.sha256}.png"
    cached.write_bytes(_png(9, 9))
    with pytest.raises(ImageError, match="sha256"):
        image_bytes(att)


def test_stored_image_reads_back_from_disk_after_memory_is_cleared():
    att = store_image(_png(8, 8))
    images._MEM.pop(att.sha256)
    assert image_bytes(att) == _png(8, 8)
