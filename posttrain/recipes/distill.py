"""The `distill` recipe (`posttrain distill CONFIG`): on-policy distillation through the one pipeline.

    cfg = distill_config(Path("examples/distill.yaml"), ["rl.steps=20"])   # the teacher checked, no weights read
    summary = run_recipe("distill", cfg, Path("runs/distill"))

The RL recipe's stages (recipes/quickstart.py TextRL: splits, base, held-out eval before, the RL loop
with its checkpoints and resume, eval after, McNemar), with three differences:
- the teacher (`distill.teacher`, the same entry as `models.teacher`) is loaded once beside the student;
- each step's advantage is the teacher's, per token: log p_T - log p_S of every sampled token
  (train/distill.py, `RLState.token_advantages`), trained with the `distill` loss; the task reward
  is still verified and logged, but does not enter the update;
- both evals also measure the student's exact reverse KL to the teacher on its held-out completions
  (`distill.eval_kl`), so the before/after table shows how far the student moved towards the teacher.
No SFT warm-up unless `sft.steps` asks for one: the student starts as it is.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Sequence

from posttrain.config import RunConfig
from posttrain.errors import ConfigError
from posttrain.recipes.pipeline import RunContext, recipe
from posttrain.recipes.quickstart import TextRL

# What `posttrain distill` sets over the RunConfig defaults before the user's YAML.
DISTILL_DEFAULTS: dict[str, Any] = {"name": "distill", "rl": {"loss": "distill"}, "sft": {"steps": 0}}


def teacher_into_models(cfg: RunConfig) -> RunConfig:
    """`distill.teacher` and `models.teacher` name one model: whichever is given fills the other."""
    given, named = cfg.distill.teacher, cfg.models.get("teacher")
    if given is not None and named is not None and given != named:
        raise ConfigError("distill.teacher and models.teacher name different teachers; give one of the two")
    teacher = given or named
    if teacher is not None:
        cfg.distill.teacher = teacher
        cfg.models["teacher"] = teacher
    return cfg


def _teacher_tokenizer(path: str) -> Any:
    from posttrain.models.tokenizer_match import load_tokenizer

    if path != "tiny":
        d = Path(path)
        if not d.is_dir():
            raise ConfigError(f"distill.teacher.path: model directory not found: {d}")
        if not (d / "config.json").is_file():
            raise ConfigError(f"distill.teacher.path={d}: not a model directory (no config.json)")
    try:
        return load_tokenizer(path)
    except (OSError, ValueError) as e:
        raise ConfigError(f"distill.teacher.path={path}: its tokenizer cannot be read ({str(e).splitlines()[0]})") from None


def check_distill(cfg: RunConfig) -> None:
    """Everything about the teacher, from config and tokenizer files only (no weights): one line naming the key."""
    from posttrain.models.tokenizer_match import load_tokenizer, tokenizer_mismatch

    if cfg.rl.loss.name != "distill":
        raise ConfigError(f"rl.loss={cfg.rl.loss.name}: posttrain distill trains with rl.loss=distill (the teacher's "
                          "per-token advantage); remove the key")
    teacher = cfg.distill.teacher
    if teacher is None:
        raise ConfigError("distill.teacher: missing; posttrain distill needs a teacher, e.g. "
                          "distill: {teacher: {path: runs/rl/model}} (a local HF directory, or tiny)")
    if teacher.path is None:
        raise ConfigError(f"distill.teacher.url={teacher.url}: distillation needs the teacher's per-token logprobs "
                          "of the student's tokens, which a chat API does not give; use distill.teacher.path")
    if cfg.trainer.world_size > 1:
        raise ConfigError(f"trainer.world_size={cfg.trainer.world_size}: posttrain distill runs on one process")
    student = cfg.model.path or "tiny"
    why = tokenizer_mismatch(load_tokenizer(cfg.model.path), _teacher_tokenizer(teacher.path))
    if why is not None:
        raise ConfigError(f"distill.teacher.path: the student {student} and the teacher {teacher.path} must share "
                          f"one tokenizer, and differ ({why})")


def distill_config(config: Path | None, overrides: list[str], base: dict | None = None,
                   plugins: Sequence[Path] = ()) -> RunConfig:
    """The run config of `posttrain distill CONFIG [overrides]`: DISTILL_DEFAULTS, CONFIG, overrides, checked."""
    from posttrain.config import load_config

    base = copy.deepcopy(DISTILL_DEFAULTS) if base is None else base
    if any(o.startswith("distill.teacher.") for o in overrides):  # `distill.teacher.path=DIR` with no teacher in CONFIG:
        base.setdefault("distill", {}).setdefault("teacher", {})  # its section starts empty, not unset
    cfg = teacher_into_models(load_config(config, overrides, base=base, plugins=plugins))
    check_distill(cfg)
    return cfg


@recipe("distill")
class Distill(TextRL):
    """On-policy distillation (`posttrain distill`): TextRL's stages with the teacher's per-token reverse-KL
    advantage in place of the reward's, and the held-out reverse KL to the teacher before and after."""

    title = "posttrain distill"

    async def base(self, ctx: RunContext) -> tuple[Any, Any]:
        from posttrain.train.distill import load_teacher

        model, tok = await super().base(ctx)
        ctx.extra["teacher"] = load_teacher(ctx.cfg, tok)  # eval mode, no gradients
        return model, tok

    async def evaluate(self, ctx: RunContext, when: str) -> Any:
        res = await super().evaluate(ctx, when)
        if res is not None and ctx.cfg.distill.eval_kl:
            ctx.extra[f"reverse_kl_{when}"] = self._reverse_kl(ctx, when, res.trajectories)
        return res

    def _reverse_kl(self, ctx: RunContext, when: str, trajs: list) -> float | None:
        """The student's exact reverse KL to the teacher on its own held-out completions; cached in the run
        directory beside eval_<when>.json, so a resumed run reads it back."""
        from posttrain.train.distill import reverse_kl_to_teacher

        path = ctx.run_dir / f"distill_kl_{when}.json"
        if path.is_file():
            return json.loads(path.read_text())["reverse_kl"]
        student = ctx.model if when == "before" else ctx.state.model
        kl = reverse_kl_to_teacher(student, ctx.extra["teacher"], trajs, ctx.tok.pad_token_id)
        path.write_text(json.dumps({"reverse_kl": kl, "n_trajectories": len(trajs)}))
        if kl is not None:
            ctx.report("log", {"line": f"held-out reverse KL to the teacher, {when} distillation: {kl:.4f} nats/token"})
        return kl

    async def train(self, ctx: RunContext) -> None:
        from posttrain.recipes.cluster import cluster_engine_factory
        from posttrain.train.distill import token_advantage_fn
        from posttrain.train.rl import train_rl

        st = ctx.rl_state(engine_factory=cluster_engine_factory(ctx.cfg))
        st.token_advantages = token_advantage_fn(ctx.extra["teacher"], ctx.tok.pad_token_id, ctx.cfg.rl)
        total = ctx.cfg.rl.steps
        await train_rl(st, on_step=lambda s, row: ctx.report("distill", {"step": s + 1, "total": total, **row}),
                       budget_s=ctx.budget_s)

    def summarize(self, ctx: RunContext, before: Any, after: Any) -> dict:
        summary = super().summarize(ctx, before, after)
        teacher = ctx.cfg.distill.teacher
        summary["distill"] = {"teacher": teacher.path if teacher else None,
                              "reverse_kl_before": ctx.extra.get("reverse_kl_before"),
                              "reverse_kl_after": ctx.extra.get("reverse_kl_after")}
        return summary
