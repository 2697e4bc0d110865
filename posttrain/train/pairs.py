"""A DPO preference pair as token ids: shared by text pairs (dpo.py) and image pairs (vision_dpo.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    prompt: tuple[int, ...]
    chosen: tuple[int, ...]
    rejected: tuple[int, ...]
    source: str = ""
    images: tuple = ()  # a VLM's image inputs for the prompt (dicts, as GenRequest.images); () = text
