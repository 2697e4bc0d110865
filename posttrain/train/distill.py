"""On-policy distillation: the student samples, the teacher scores every sampled token, the student
minimises the reverse KL, through the RL update.

    teacher = load_teacher(cfg)                              # models.teacher.path, same tokenizer (checked)
    adv = distill_advantages(trajs, teacher, pad_id)         # [B, W]: log p_teacher - log p_student per token
    stats = update_policy(model, opt, trajs, adv, cfg.rl, pad_id)   # rl.loss = distill (train/losses.py)

    history = train_distill(cfg, tasks)                      # the whole loop: rollout, score, update, sync

Per token t of a student sample, the advantage is log p_T(x_t | x_<t) - log p_S(x_t | x_<t), the
negated per-token reverse KL, with log p_S the sampling policy's logprob (the engine's, as the
RL ratio uses). Maximising it with the policy gradient minimises KL(p_S || p_T) on the student's
own distribution (Agarwal et al. 2024, GKD; Thinking Machines' "on-policy distillation", 2025).
The task's reward is still computed (the verifier runs) and reported, but it does not enter the
update. LoRA or full fine-tuning: `trainer.lora`, as in RL.

Limits: the teacher runs in-process on the trainer's device (a teacher behind a URL is refused at
config load: per-token logprobs of given tokens are not part of the chat API); single-turn tasks.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Sequence

import torch

from posttrain.config import RLConfig, RunConfig
from posttrain.models.tokenizer_match import load_tokenizer, tokenizer_mismatch
from posttrain.errors import ConfigError
from posttrain.rollout.engine import SamplingParams
from posttrain.rollout.single_turn import rollout_single_turn
from posttrain.train.batching import pack_trajectories, token_logprobs
from posttrain.train.optim import build_optimizer, build_schedule
from posttrain.train.update import SampleLayout, metric_name, update_policy
from posttrain.types import Task, Trajectory


def load_teacher(cfg: RunConfig, student_tok: Any) -> Any:
    """The teacher model (eval mode, no gradients) named by models.teacher.path; refuses a tokenizer mismatch."""
    teacher = cfg.models.get("teacher")
    if teacher is None or teacher.path is None:
        raise ConfigError("on-policy distillation needs models.teacher.path (a local HF directory)")
    why = tokenizer_mismatch(student_tok, load_tokenizer(teacher.path))
    if why is not None:
        raise ConfigError(f"on-policy distillation needs one tokenizer: student {cfg.model.path or 'tiny'} and "
                          f"teacher {teacher.path} differ ({why})")
    from posttrain.rollout.service_local import load_second_model

    model, _ = load_second_model(teacher.path)
    model.eval().requires_grad_(False)
    return model


def distill_advantages(trajs: Sequence[Trajectory], teacher: Any, pad_id: int, rl: RLConfig | None = None) -> torch.Tensor:
    """[B, W]: on every trainable token, teacher logprob minus the student's sampled logprob; 0 elsewhere.
    With `rl` (the run's rl: section) the teacher reads the samples as the update does (train/update.py
    SampleLayout: a group's prompt once, identical samples once); without it, one padded row per sample."""
    return _advantages_and_mask(trajs, teacher, pad_id, rl)[0]


def _advantages_and_mask(trajs: Sequence[Trajectory], teacher: Any, pad_id: int,
                         rl: RLConfig | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(distill_advantages [B, W], the trainable-token mask [B, W] of the one packing both come from)."""
    tb = pack_trajectories(trajs, pad_id)
    with torch.no_grad():
        if rl is None:
            t_logp, _ = token_logprobs(teacher, tb.input_ids, tb.attention_mask)  # [B, W]
        else:
            t_logp, _ = SampleLayout(teacher, trajs, tb, pad_id, rl).logprobs(teacher)  # [B, W]
    return (t_logp.float() - tb.old_logp) * tb.loss_mask, tb.loss_mask


def token_advantage_fn(teacher: Any, pad_id: int,
                        rl: RLConfig | None = None) -> Callable[[list[Trajectory]], tuple[torch.Tensor, torch.Tensor]]:
    """RLState.token_advantages for the RL loop (train/rl.py learn): trajectories [B] -> (advantages [B, W],
    their mean over each sample's trainable tokens [B], which the trajectory store keeps)."""

    def advantages(trajs: list[Trajectory]) -> tuple[torch.Tensor, torch.Tensor]:
        adv, mask = _advantages_and_mask(trajs, teacher, pad_id, rl)  # [B, W] each
        return adv, adv.sum(1) / mask.sum(1).clamp(min=1)

    return advantages


@torch.no_grad()
def reverse_kl_to_teacher(student: Any, teacher: Any, trajs: Sequence[Trajectory], pad_id: int) -> float | None:
    """Exact KL(p_S || p_T) over the whole vocabulary at every completion token of `trajs` (the student's own
    held-out completions), mean over tokens; None when no trajectory has a completion token. One trajectory
    at a time, only its completion positions kept before the softmax: [L, V] logits, not [B, L, V]."""
    total, n = 0.0, 0
    was_training = student.training
    student.eval()
    for t in trajs:
        tb = pack_trajectories([t], pad_id)
        keep = tb.loss_mask[0].bool()  # [L-1]: column j predicts token j+1
        if not keep.any():
            continue
        ls = student(input_ids=tb.input_ids, attention_mask=tb.attention_mask).logits[0, :-1][keep].float()  # [n, V]
        lt = teacher(input_ids=tb.input_ids, attention_mask=tb.attention_mask).logits[0, :-1][keep].float()  # [n, V]
        ls, lt = torch.log_softmax(ls, -1), torch.log_softmax(lt, -1)
        total += float((ls.exp() * (ls - lt)).sum())
        n += int(keep.sum())
    student.train(was_training)
    return total / n if n else None


def _engine(cfg: RunConfig, model: Any, tok: Any) -> Any:
    from posttrain.rollout import make_engine

    return make_engine(cfg.engine.name, model, tok, **cfg.engine.args)


def _sync(engine: Any, model: Any, version: int) -> None:
    from posttrain.train.rl_model import plain_state

    engine.load_weights(plain_state(model), version)


def distill_step(cfg: RunConfig, model: Any, tok: Any, teacher: Any, engine: Any, opt: Any, tasks: Sequence[Task],
                 step: int) -> tuple[dict[str, float], list[Trajectory]]:
    """One step: sample, verify (reported only), teacher-score, update, sync. Returns (metrics, trajectories)."""
    from posttrain.verifiers.run import verify_trajectories

    rl = cfg.rl
    t0 = time.perf_counter()
    params = SamplingParams(temperature=rl.temperature, top_p=rl.top_p, max_new_tokens=rl.max_new_tokens,
                            n=rl.group_size, seed=cfg.seed * 100_003 + step)
    trajs = asyncio.run(rollout_single_turn(engine, tok, tasks, params, step=step))
    t_gen = time.perf_counter()
    trajs = asyncio.run(verify_trajectories({t.id: t for t in tasks}, trajs, None))
    learn = [t for t in trajs if t.error is None or t.error.boundary == "verifier"]
    t_ver = time.perf_counter()
    adv = distill_advantages(learn, teacher, tok.pad_token_id, rl)
    t_teacher = time.perf_counter()
    stats = update_policy(model, opt, learn, adv, rl, tok.pad_token_id) if learn else {}
    t_upd = time.perf_counter()
    _sync(engine, model, step + 1)
    scored = [t for t in trajs if not t.infra_error]
    row = {"step": step, "samples": len(trajs), "reward/mean": sum(t.reward for t in scored) / max(1, len(scored)),
           "time/generate_s": t_gen - t0, "time/verify_s": t_ver - t_gen, "time/teacher_s": t_teacher - t_ver,
           "time/update_s": t_upd - t_teacher, "time/step_s": time.perf_counter() - t0,
           **{metric_name(k): v for k, v in stats.items()}}
    row["time/teacher_frac"] = row["time/teacher_s"] / row["time/step_s"]
    return row, trajs


def train_distill(cfg: RunConfig, tasks: Sequence[Task], model: Any, tok: Any,
                  on_step: Callable[[dict[str, float]], None] | None = None) -> list[dict[str, float]]:
    """`cfg.rl.steps` distillation steps over `tasks` (rl.prompts_per_step a step, cycling) on `model`
    (already LoRA-wrapped where trainer.lora is set: train/lora.prepare_model)."""
    if cfg.rl.loss.name != "distill":
        raise ConfigError(f"train_distill needs rl.loss=distill, got {cfg.rl.loss.name!r}")
    teacher = load_teacher(cfg, tok)
    engine = _engine(cfg, model, tok)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = build_optimizer(params, cfg.rl.optim)  # the one factory (train/optim.py), as RL's trainer
    lr_sched = build_schedule(opt, cfg.rl.optim, cfg.rl.steps)
    history, k = [], cfg.rl.prompts_per_step
    for step in range(cfg.rl.steps):
        batch = [tasks[(step * k + i) % len(tasks)] for i in range(k)]
        row, _ = distill_step(cfg, model, tok, teacher, engine, opt, batch, step)
        lr_sched.step()
        history.append(row)
        if on_step is not None:
            on_step(row)
    return history
