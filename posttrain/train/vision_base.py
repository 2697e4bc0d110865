"""The starting VLM of an image run: `model.path`, or the tiny default with its tower pretrained.

    model, tok = build_base_vlm(cfg, run_dir, train_tasks, report)

Used by the vision recipe (recipes/vision.py) and by `posttrain dpo` on image pairs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

from posttrain.config import RunConfig, TinyVisionConfig
from posttrain.store.run import RunDir
from posttrain.types import Task

Report = Callable[[str, dict], None]  # phase, info -> progress display


def build_base_vlm(cfg: RunConfig, run_dir: Path, train: Sequence[Task] = (), report: Report | None = None
                   ) -> tuple[Any, Any]:
    """The run's starting VLM: `model.path` as it is, or the tiny default saved under base-model/.
    With train tasks, the tiny default's tower is first pretrained on their images, pixels only
    (`model.vision.pretrain`, tower_pretrain.py): the stand-in for a pretrained SigLIP."""
    from posttrain.models.vlm import build_tiny_vlm, load_vlm, save_vlm

    if cfg.model.path:
        return load_vlm(cfg.model.path, cfg.model.dtype)
    base = RunDir(run_dir).base_model
    if not (base / "config.json").is_file():
        model, tok = build_tiny_vlm(cfg.model.tiny, cfg.model.vision, seed=cfg.seed)
        vcfg = cfg.model.vision
        if vcfg is not None and vcfg.pretrain.steps and train:
            pretrain_images(model, tok, train, vcfg, cfg.seed, report or (lambda phase, info: None), run_dir)
        save_vlm(model, tok, base)
    return load_vlm(base)  # the from_pretrained path a real checkpoint takes


def pretrain_images(model: Any, tok: Any, train: Sequence[Task], vcfg: TinyVisionConfig, seed: int, report: Report,
                    run_dir: Path) -> None:
    """Pretrain the tower on every decodable image of `train`; a bad image is skipped and counted, not fatal."""
    from posttrain.tasks.images import ImageError, open_image, task_images
    from posttrain.train.tower_pretrain import pretrain_tower

    images, skipped = [], 0
    for t in train:
        for a in task_images(t):
            try:
                images.append(open_image(a, vcfg.max_image_side))
            except ImageError:
                skipped += 1
    if not images:
        return
    pre = vcfg.pretrain
    losses = pretrain_tower(model, tok, images, pre, seed=seed,
                            on_step=lambda s, l: report("tower", {"step": s + 1, "total": pre.steps, "loss": l}))
    (run_dir / "tower_losses.json").write_text(json.dumps({"losses": losses, "images": len(images),
                                                           "skipped_images": skipped}))
