"""Load and save policies in Hugging Face format (any causal-LM directory)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from posttrain.errors import ModelError


def hf_model_dir(path: str | Path) -> Path:
    """The checked model directory, with hub downloads and progress bars off (every loader's preamble)."""
    from transformers.utils import logging as hf_logging

    p = Path(path)
    if not p.is_dir():
        raise ModelError(f"model directory not found: {p}")
    if not (p / "config.json").is_file():
        raise ModelError(f"not a Hugging Face model directory (no config.json): {p}")
    hf_logging.disable_progress_bar()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return p


def load_policy(path: str | Path, dtype: str = "float32") -> tuple[Any, Any]:
    """`(model, tokenizer)` from an HF directory; ModelError names a missing or bad path."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    p = hf_model_dir(path)
    try:
        tok = AutoTokenizer.from_pretrained(p)
        model = AutoModelForCausalLM.from_pretrained(p, dtype=getattr(torch, dtype))
    except (OSError, ValueError) as e:
        raise ModelError(f"cannot load model from {p}: {str(e).splitlines()[0]}") from None
    if tok.eos_token_id is None:
        raise ModelError(f"tokenizer in {p} has no EOS token; generation could never stop")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return model, tok


def save_policy(model: Any, tok: Any, path: str | Path) -> Path:
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(p)
    tok.save_pretrained(p)
    return p
