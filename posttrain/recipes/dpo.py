"""The `dpo` recipe (`posttrain dpo CONFIG`): pairs -> reference logprobs once -> DPO (sigmoid or
IPO) -> `RUN/model`, with the held-out pair metrics before and after, through the one pipeline
(recipes/pipeline.py).

    summary = run_recipe("dpo", cfg, Path("runs/dpo"))

The pairs come from `dpo.data` (a pairs JSONL, image attachments allowed) or `dpo.from_run` (an
RL run's trajectories). A vision model (`model.vision`, or a VLM directory) trains the same way.
At `WORLD_SIZE` > 1 this process is rank 0 and trains on FSDP2/TP shards (looked up by name).
"""

from __future__ import annotations

import random
from typing import Any

from posttrain.config import RunConfig
from posttrain.errors import ConfigError
from posttrain.recipes.pipeline import RunContext, recipe
from posttrain.store.run import RunDir


@recipe("dpo")
class DPO:
    title = "posttrain dpo"
    summary_file = "dpo_summary.json"
    sandboxed = False
    resumable = True  # supervised checkpoints (train/supervised_checkpoint.py)

    def splits(self, cfg: RunConfig) -> None:
        return None  # the pairs come from a file or a run, split below (dpo.loss: checked at config load)

    async def base(self, ctx: RunContext) -> tuple[Any, Any]:
        """The base model with its adapters attached, the train/held-out pairs and their reference logprobs."""
        from posttrain.models.base import build_base
        from posttrain.models.vlm import is_vision_dir, processor_of
        from posttrain.train.dpo import load_pairs, reference_logprobs
        from posttrain.train.lora import prepare_model
        from posttrain.train.vision_base import build_base_vlm

        cfg, x = ctx.cfg, ctx.extra
        x["vision"] = cfg.model.vision is not None or bool(cfg.model.path and is_vision_dir(cfg.model.path))
        model, tok = build_base_vlm(cfg, ctx.run_dir) if x["vision"] else build_base(cfg, ctx.run_dir)
        pairs = load_pairs(cfg, tok)
        image_id = getattr(processor_of(tok), "image_token_id", None)
        if cfg.dpo.from_run is not None and image_id is not None and any(image_id in p.prompt for p in pairs):
            raise ConfigError(f"dpo.from_run: {cfg.dpo.from_run} holds image prompts, and a run keeps task versions, "
                              f"not pixels; write the pairs to a JSONL with image attachments and set dpo.data")
        order = list(range(len(pairs)))
        random.Random(cfg.seed).shuffle(order)
        k = int(len(pairs) * cfg.dpo.eval_frac) if cfg.dpo.eval_every and len(pairs) > 1 else 0
        x["train"], x["held"] = [pairs[i] for i in order[k:]], [pairs[i] for i in order[:k]]
        pad = tok.pad_token_id
        x["ref"] = reference_logprobs(model, x["train"], pad, cfg.dpo.max_len)  # before LoRA: the exact base
        x["ref_eval"] = reference_logprobs(model, x["held"], pad, cfg.dpo.max_len) if x["held"] else None
        return prepare_model(model, cfg.trainer, cfg.seed), tok

    async def warm_up(self, ctx: RunContext) -> tuple[Any, Any]:
        return ctx.model, ctx.tok  # a DPO run starts from the base (an SFT run's model.path, typically)

    async def evaluate(self, ctx: RunContext, when: str) -> dict | None:
        from posttrain.train.dpo import evaluate_pairs

        x = ctx.extra
        if not x["held"]:
            return None
        if when == "before":
            return evaluate_pairs(ctx.model, x["held"], x["ref_eval"], ctx.cfg.dpo, ctx.tok.pad_token_id)
        hist = x["history"]
        return {k: v for k, v in hist[-1].items() if k.startswith("eval/")} if hist else None

    async def train(self, ctx: RunContext) -> None:
        from posttrain.models import save_policy
        from posttrain.models.vlm import save_vlm
        from posttrain.store.metrics import run_metrics
        from posttrain.train.dpo import PairObjective
        from posttrain.train.lora import export_model
        from posttrain.train.sharded.supervised import supervised_trainer
        from posttrain.train.supervised import train_supervised
        from posttrain.train.supervised_checkpoint import SupervisedCheckpoints

        cfg, x, pad = ctx.cfg, ctx.extra, ctx.tok.pad_token_id
        # rank 0 of N (WORLD_SIZE > 1): the same pairs on FSDP2/TP shards; else this process
        trainer = supervised_trainer(ctx.model, cfg.trainer, cfg.dpo.optim, cfg.dpo.steps, pad)
        metrics = run_metrics(cfg, ctx.run_dir, "dpo")  # metrics.jsonl + log.trackers (tensorboard by default)

        def on_step(step: int, row: dict) -> None:
            metrics.log(step, row)
            ctx.report("dpo", {"step": step + 1, "total": cfg.dpo.steps, **row})

        evals = (x["held"], x["ref_eval"]) if x["held"] else None
        ckpts = SupervisedCheckpoints(ctx.run_dir, ctx.tok, cfg.dpo.checkpoint_every, ctx.resume, metrics.truncate_after)
        try:
            hist = train_supervised(PairObjective(x["train"], x["ref"], cfg.dpo, pad, evals), trainer, cfg.dpo.steps,
                                    cfg.seed, cfg.dpo.eval_every if evals else 0, on_step, checkpoints=ckpts)
            ctx.model = trainer.export_model()
        finally:
            trainer.close()
            metrics.close()
        x["history"] = hist
        x["out"] = (save_vlm if x["vision"] else save_policy)(export_model(ctx.model), ctx.tok, RunDir(ctx.run_dir).model)

    def summarize(self, ctx: RunContext, before: dict | None, after: dict | None) -> dict:
        x = ctx.extra
        hist = x["history"]
        return {"model": str(x["out"]), "n_pairs": len(x["train"]), "n_eval": len(x["held"]), "loss": ctx.cfg.dpo.loss.name,
                "final_loss": hist[-1]["loss"] if hist else None, "eval_before": before, "eval_after": after}

    def finish(self, ctx: RunContext, summary: dict) -> None:
        pass  # report.html (the pipeline's) draws the loss and reward-margin curves
