"""The pre-flight of a model directory: config, dense weights, tokenizer and, when asked, a chat template.

    info = check_model_dir("models/smollm2", need_chat_template=True)   # ModelError naming the fix

Used by the converter (models/gguf.py), the catalog and `posttrain models check`.
"""

from __future__ import annotations

import json
from pathlib import Path

from posttrain.errors import ModelError

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")


def check_model_dir(path: str | Path, need_chat_template: bool = True) -> dict:
    """Pre-flight for any code that loads a model directory: config, weights, tokenizer, and (when
    asked) a chat template. Returns {"chat_template": bool, "model_type": str}; ModelError naming
    the directory and the fix otherwise. Reads only small JSON files."""
    p = Path(path)
    if not p.is_dir():
        raise ModelError(f"model directory not found: {p}")
    cfg_file = p / "config.json"
    if not cfg_file.is_file():
        raise ModelError(f"{p} has no config.json, so it is not a Hugging Face model directory; "
                         f"get one with `posttrain models get NAME --out {p}`")
    try:
        cfg = json.loads(cfg_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelError(f"{cfg_file} is not valid JSON ({e}); convert the model again") from None
    if cfg.get("quantization_config"):
        method = cfg["quantization_config"].get("quant_method", "?")
        raise ModelError(f"{p} is a quantised checkpoint ({method}); posttrain trains dense weights: "
                         f"convert it with `posttrain models convert-gguf FILE --out DIR`")
    weights = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
    if not any((p / w).is_file() for w in weights):
        raise ModelError(f"{p} has no weights (model.safetensors or pytorch_model.bin); save them with "
                         f"model.save_pretrained({str(p)!r})")
    if not any((p / t).is_file() for t in _TOKENIZER_FILES):
        raise ModelError(f"{p} has no tokenizer (none of {', '.join(_TOKENIZER_FILES)}); save one with "
                         f"tokenizer.save_pretrained({str(p)!r})")
    tok_cfg_file = p / "tokenizer_config.json"
    tok_cfg = {}
    if tok_cfg_file.is_file():
        try:
            tok_cfg = json.loads(tok_cfg_file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ModelError(f"{tok_cfg_file} is not valid JSON ({e}); save the tokenizer again") from None
    has_template = (p / "chat_template.jinja").is_file() or (p / "chat_template.json").is_file() \
        or bool(tok_cfg.get("chat_template"))
    if need_chat_template and not has_template:
        raise ModelError(f"{p} has no chat template (no chat_template.jinja, none in tokenizer_config.json): it is "
                         f"probably a base model; use an instruct model, or set tokenizer.chat_template and "
                         f"save_pretrained({str(p)!r})")
    return {"chat_template": has_template, "model_type": cfg.get("model_type")}
