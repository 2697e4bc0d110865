"""The `sft` recipe (`posttrain sft CONFIG`): base model -> SFT -> `RUN/model`, with the eval loss
before and after, through the one pipeline (recipes/pipeline.py).

    summary = run_recipe("sft", cfg, Path("runs/sft"))

The data is `sft.data` (chat JSONL, eval from `sft.eval_data` or a seeded `sft.eval_frac`
split) or, without it, oracle demonstrations of the configured task domains, whose splits the
pipeline pins in RUN/tasks. At `WORLD_SIZE` > 1 this process is rank 0 and trains on FSDP2/TP
shards (train/sharded/, looked up by name).
"""

from __future__ import annotations

from typing import Any

from posttrain.config import RunConfig
from posttrain.recipes.pipeline import RunContext, recipe
from posttrain.store.run import RunDir


@recipe("sft")
class SFT:
    title = "posttrain sft"
    summary_file = "sft_summary.json"
    sandboxed = False
    resumable = True  # supervised checkpoints (train/supervised_checkpoint.py)

    def splits(self, cfg: RunConfig) -> Any:
        from posttrain.tasks.splits import make_splits

        return make_splits(cfg) if cfg.sft.data is None else None  # oracle demonstrations of these tasks

    async def base(self, ctx: RunContext) -> tuple[Any, Any]:
        """The base model with its adapters attached (trainer.lora), and the encoded data."""
        from posttrain.models.base import build_base
        from posttrain.train.lora import prepare_model
        from posttrain.train.sft import sft_data

        model, tok = build_base(ctx.cfg, ctx.run_dir)
        ctx.extra["train"], ctx.extra["evals"] = sft_data(ctx.cfg, tok, ctx.splits)
        return prepare_model(model, ctx.cfg.trainer, ctx.cfg.seed), tok

    async def warm_up(self, ctx: RunContext) -> tuple[Any, Any]:
        return ctx.model, ctx.tok  # SFT is the training stage itself

    async def evaluate(self, ctx: RunContext, when: str) -> float | None:
        from posttrain.train.sft import eval_loss

        evals, s = ctx.extra["evals"], ctx.cfg.sft
        if not evals:
            return None
        if when == "before":
            return eval_loss(ctx.model, evals, ctx.tok.pad_token_id, s.pack, s.max_len)
        return next((r["eval/loss"] for r in reversed(ctx.extra["history"]) if "eval/loss" in r), None)

    async def train(self, ctx: RunContext) -> None:
        from posttrain.models import save_policy
        from posttrain.store.metrics import run_metrics
        from posttrain.train.lora import export_model
        from posttrain.train.sft import EncodedSFT
        from posttrain.train.sharded.supervised import supervised_trainer
        from posttrain.train.supervised import train_supervised
        from posttrain.train.supervised_checkpoint import SupervisedCheckpoints

        cfg, pad, evals = ctx.cfg, ctx.tok.pad_token_id, ctx.extra["evals"]
        # rank 0 of N (WORLD_SIZE > 1): the same batches on FSDP2/TP shards; else this process
        trainer = supervised_trainer(ctx.model, cfg.trainer, cfg.sft.optim, cfg.sft.steps, pad)
        metrics = run_metrics(cfg, ctx.run_dir, "sft")  # metrics.jsonl + log.trackers (tensorboard by default)

        def on_step(step: int, row: dict) -> None:
            metrics.log(step, row)
            ctx.report("sft", {"step": step + 1, "total": cfg.sft.steps, **row})

        ckpts = SupervisedCheckpoints(ctx.run_dir, ctx.tok, cfg.sft.checkpoint_every, ctx.resume, metrics.truncate_after)
        try:
            hist = train_supervised(EncodedSFT(ctx.extra["train"], cfg.sft, pad, evals), trainer, cfg.sft.steps,
                                    cfg.seed, cfg.sft.eval_every if evals else 0, on_step, checkpoints=ckpts)
            ctx.model = trainer.export_model()
        finally:
            trainer.close()
            metrics.close()
        ctx.extra["history"] = hist
        ctx.extra["out"] = save_policy(export_model(ctx.model), ctx.tok, RunDir(ctx.run_dir).model)

    def summarize(self, ctx: RunContext, before: float | None, after: float | None) -> dict:
        hist = ctx.extra["history"]
        return {"model": str(ctx.extra["out"]), "n_train": len(ctx.extra["train"]), "n_eval": len(ctx.extra["evals"]),
                "steps": ctx.cfg.sft.steps, "final_loss": hist[-1]["loss"] if hist else None,
                "eval_loss_before": before, "eval_loss_after": after}

    def finish(self, ctx: RunContext, summary: dict) -> None:
        pass  # report.html (the pipeline's) draws the loss curves from metrics.jsonl
