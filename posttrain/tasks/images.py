"""Image attachments: content-addressed bytes, resolved by sha256, decoded within a budget.

    att = store_image(png_bytes(img))          # Attachment("image", sha, "images/<sha>.png")
    img = open_image(att)                      # PIL RGB image, long side <= MAX_SIDE
    add_search_root(Path("suite_dir"))         # load_tasks does this for a task file's folder

An attachment's `path` is always relative (`images/<sha256>.png`), so `task.version`
does not depend on where the bytes live. Bytes are found, in order: this process's
memory, each registered search root (the folder of every loaded task file), then the
disk cache (`$POSTTRAIN_IMAGE_DIR`, default `~/.cache/posttrain/images`). The bytes
read are checked against the sha256; a mismatch is a corrupt attachment.

Budget: images over MAX_DECODE_PIXELS are refused before decoding (decompression
bombs); decoded images are shrunk so the long side is at most MAX_SIDE (aspect kept).
Every failure raises ImageError naming the attachment; callers turn it into a per-task
error. Does not support: animated images (the first frame is used), non-image kinds.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from pathlib import Path
from typing import Any

from posttrain.errors import PosttrainError
from posttrain.types import Attachment, Task

MAX_SIDE = 1024  # px, long side after decoding; the processor then resizes to the model's input
MAX_DECODE_PIXELS = 64_000_000  # refuse to decode anything bigger (about 8000 x 8000)

_MEM: dict[str, bytes] = {}
_ROOTS: list[Path] = []
_LOCK = threading.Lock()


class ImageError(PosttrainError):
    """A missing, corrupt or oversized image attachment; the message names it."""


def image_dir() -> Path:
    return Path(os.environ.get("POSTTRAIN_IMAGE_DIR") or Path.home() / ".cache" / "posttrain" / "images")


def png_bytes(img: Any) -> bytes:
    """Deterministic PNG encoding of a PIL image (no timestamps or text chunks)."""
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False, compress_level=6)
    return buf.getvalue()


def store_image(data: bytes, mime: str = "image/png", persist: bool = True) -> Attachment:
    """Keep `data` in memory (and in the disk cache when `persist`); return its attachment."""
    sha = hashlib.sha256(data).hexdigest()
    ext = {"image/png": "png", "image/jpeg": "jpg"}.get(mime, "bin")
    with _LOCK:
        _MEM[sha] = data
    if persist:
        d = image_dir()
        target = d / f"{sha}.{ext}"
        if not target.is_file():
            try:
                d.mkdir(parents=True, exist_ok=True)
                tmp = d / f".{sha}.{os.getpid()}.tmp"
                tmp.write_bytes(data)
                tmp.replace(target)
            except OSError:  # a read-only home is not fatal: memory still holds the bytes
                pass
    return Attachment("image", sha, f"images/{sha}.{ext}", mime)


def add_search_root(root: Path) -> None:
    root = Path(root).resolve()
    with _LOCK:
        if root not in _ROOTS:
            _ROOTS.append(root)


def _candidates(att: Attachment) -> list[Path]:
    p = Path(att.path) if att.path else None
    out = []
    if p is not None and p.is_absolute():
        out.append(p)
    elif p is not None:
        out += [r / p for r in _ROOTS]
    name = Path(att.path).name if att.path else f"{att.sha256}.png"
    out.append(image_dir() / name)
    return out


def image_bytes(att: Attachment) -> bytes:
    """The attachment's bytes, checked against its sha256; ImageError if missing or altered."""
    if att.kind != "image":
        raise ImageError(f"attachment {att.path or att.sha256[:12]}: kind {att.kind!r} is not an image")
    data = _MEM.get(att.sha256)
    if data is not None:
        return data
    tried = _candidates(att)
    for c in tried:
        try:
            data = c.read_bytes()
        except OSError:
            continue
        got = hashlib.sha256(data).hexdigest()
        if got != att.sha256:
            raise ImageError(f"image {c}: corrupt attachment, sha256 {got[:12]} != expected {att.sha256[:12]}")
        with _LOCK:
            _MEM[att.sha256] = data
        return data
    raise ImageError(f"image attachment {att.path or att.sha256[:12]} not found "
                     f"(looked in {', '.join(str(t.parent) for t in tried) or 'nowhere'})")


def decode_image(data: bytes, name: str, max_side: int = MAX_SIDE) -> Any:
    """Bytes -> RGB PIL image, long side <= max_side; ImageError for undecodable or bomb-sized data."""
    from PIL import Image, UnidentifiedImageError

    try:
        img = Image.open(io.BytesIO(data))
        w, h = img.size
        if w * h > MAX_DECODE_PIXELS:
            raise ImageError(f"image {name}: {w}x{h} exceeds the decode budget of {MAX_DECODE_PIXELS} pixels")
        img.draft("RGB", (max_side, max_side))  # JPEG: decode at reduced scale, cheap
        img = img.convert("RGB")
    except ImageError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise ImageError(f"image {name}: corrupt or unsupported image data ({type(e).__name__}: {e})") from None
    if max(img.size) > max_side:
        img.thumbnail((max_side, max_side))
    return img


def open_image(att: Attachment, max_side: int = MAX_SIDE) -> Any:
    return decode_image(image_bytes(att), att.path or att.sha256[:12], max_side)


def task_images(task: Task) -> list[Attachment]:
    """Every image attachment of the task's prompt, in message order."""
    return [a for m in task.prompt for a in m.attachments if a.kind == "image"]


def export_attachments(tasks: list[Task], folder: Path) -> int:
    """Write each relative attachment's bytes we hold under `folder` (beside a task file); returns files written.

    An attachment whose bytes this process cannot find is left as a reference (the user may
    manage that file); using the task later gives a per-task "not found" error."""
    n = 0
    for t in tasks:
        for m in t.prompt:
            for a in m.attachments:
                if not a.path or Path(a.path).is_absolute():
                    continue
                target = Path(folder) / a.path
                if target.is_file():
                    continue
                try:
                    data = image_bytes(a)
                except ImageError:  # bytes managed by the user beside the file, or absent: loading reports it per task
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                n += 1
    return n


def image_task(domain: str, task_id: str, img: Any, question: str, verifier: Any, oracle: str, difficulty: float,
               metadata: dict[str, Any], max_new_tokens: int = 8) -> Task:
    """A single-turn task whose user message carries `img` as an attachment (bytes hashed into version)."""
    from posttrain.types import Limits, Message

    att = store_image(png_bytes(img))
    return Task(id=task_id, domain=domain, prompt=(Message("user", question, attachments=(att,)),),
                verifier=verifier, difficulty=difficulty,
                limits=Limits(max_steps=1, max_new_tokens=max_new_tokens, timeout_s=10.0),
                metadata=metadata, oracle=oracle)
