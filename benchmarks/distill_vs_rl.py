"""On-policy distillation against RL: how much of an RL teacher's held-out gain a base student recovers,
with how many rollouts.

    # 1. the teacher: an RL run on SmolLM2 (its metrics.jsonl gives the RL curve and its rollout count), e.g.
    posttrain quickstart --preset smollm2 model.path=models/smollm2 name=rl_teacher
    # 2. distil it into the base model with at most a quarter of the RL run's rollouts
    python benchmarks/distill_vs_rl.py --student models/smollm2 --teacher runs/rl_teacher/final \
        --rl-metrics runs/rl_teacher/metrics.jsonl --domain bfcl --n-eval 100
    python benchmarks/distill_vs_rl.py --smoke          # tiny student, sharpened tiny teacher: checks the script

Held-out pass@1 (greedy) of the base student, the teacher and the student after each distillation
step's share of rollouts (the curve per sample); recovered = (student - base) / (teacher - base),
with a paired test (McNemar, exact) of student against base on the same items and a paired 95%
interval of the difference. Target (issue 43): recovered >= 0.8 with rollouts <= RL rollouts / 4.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from posttrain.config import RunConfig  # noqa: E402
from posttrain.eval.stats import mcnemar_exact, paired_delta_ci  # noqa: E402
from posttrain.registry import build  # noqa: E402
from posttrain.rollout import make_engine  # noqa: E402
from posttrain.rollout.engine import SamplingParams  # noqa: E402
from posttrain.rollout.single_turn import rollout_single_turn  # noqa: E402
from posttrain.train.distill import distill_step, load_teacher  # noqa: E402
from posttrain.verifiers.run import verify_trajectories  # noqa: E402
from posttrain.types import thaw  # noqa: E402


def heldout(model, tok, tasks, max_new: int) -> list[float]:
    """Greedy pass@1 per held-out task (1.0 / 0.0)."""
    eng = make_engine("hf", model, tok)
    trajs = asyncio.run(rollout_single_turn(eng, tok, tasks, SamplingParams(temperature=0.0, max_new_tokens=max_new)))
    trajs = asyncio.run(verify_trajectories({t.id: t for t in tasks}, trajs, None))
    return [float(t.verify is not None and t.verify.passed) for t in trajs]


def rl_curve(path: str | None, per_step: int) -> tuple[list[dict], int]:
    """The RL run's training rows with the rollouts used so far (`per_step` a step: prompts x group), and the total."""
    if not path:
        return [], 0
    rows, seen = [], 0
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        if "reward/mean" in r:
            seen += per_step
            rows.append({"rollouts": seen, **{k: v for k, v in r.items() if k == "reward/mean" or k.startswith("eval/")}})
    return rows, seen


def load(path: str):
    from posttrain.rollout.service_local import load_second_model

    return load_second_model(path)


def main(a: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    dom = build(a.domain, kind="domain")
    train, test = dom.generate(a.n_train, seed=0), dom.generate(a.n_eval, seed=10_000)
    cfg = RunConfig.model_validate({"engine": {"name": a.engine}, "models": {"teacher": {"path": a.teacher}},
                                    "rl": {"loss": "distill", "prompts_per_step": a.prompts, "group_size": a.group,
                                           "lr": a.lr, "max_new_tokens": a.max_new_tokens}})
    student, tok = load(a.student)
    if a.lora:
        from posttrain.config_schema import LoraConfig, TrainerConfig
        from posttrain.train.lora import prepare_model

        student = prepare_model(student, TrainerConfig(lora=LoraConfig(r=16, alpha=32)))
    teacher = load_teacher(cfg, tok)
    base = heldout(student, tok, test, a.max_new_tokens)
    teach = heldout(teacher, tok, test, a.max_new_tokens)
    rl_rows, rl_rollouts = rl_curve(a.rl_metrics, a.rl_step_rollouts)
    budget = a.budget or (rl_rollouts // 4 if rl_rollouts else a.prompts * a.group * 4)
    engine = make_engine(a.engine, student, tok)
    opt = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=a.lr)
    curve, used, step = [{"rollouts": 0, "pass": sum(base) / len(base)}], 0, 0
    t0 = time.perf_counter()
    while used < budget:
        batch = [train[(step * a.prompts + i) % len(train)] for i in range(a.prompts)]
        row, trajs = distill_step(cfg, student, tok, teacher, engine, opt, batch, step)
        used += len(trajs)
        step += 1
        if step % a.eval_every == 0 or used >= budget:
            s = heldout(student, tok, test, a.max_new_tokens)
            curve.append({"rollouts": used, "pass": sum(s) / len(s), "reverse_kl": row.get("train/reverse_kl"),
                          "teacher_frac": row["time/teacher_frac"], "step_s": row["time/step_s"]})
    final = heldout(student, tok, test, a.max_new_tokens)
    gain_t = (sum(teach) - sum(base)) / len(base)
    gain_s = (sum(final) - sum(base)) / len(base)
    b = sum(1 for x, y in zip(base, final) if x > y)
    c = sum(1 for x, y in zip(base, final) if y > x)
    return {"domain": a.domain, "n_eval": len(test), "base": sum(base) / len(base), "teacher": sum(teach) / len(teach),
            "student": sum(final) / len(final), "recovered": gain_s / gain_t if gain_t else None,
            "mcnemar_p": mcnemar_exact(b, c), "delta_ci95": paired_delta_ci(base, final, list(range(len(base)))),
            "distill_rollouts": used, "rl_rollouts": rl_rollouts, "distill_curve": curve,
            "rl_curve": rl_rows, "wall_s": time.perf_counter() - t0}


def smoke_teacher() -> str:
    """A tiny model with a sharpened head saved to a temp dir: a stand-in teacher for --smoke only."""
    import tempfile

    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    m, tok = build_tiny(seed=0)
    with torch.no_grad():
        m.lm_head.weight.mul_(3.0)
    return str(save_policy(m, tok, Path(tempfile.mkdtemp()) / "teacher"))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--student", default="models/smollm2")
    ap.add_argument("--teacher", default=None, help="the RL-improved checkpoint (an HF directory)")
    ap.add_argument("--rl-metrics", default=None, help="the RL run's metrics.jsonl: its curve and rollout count")
    ap.add_argument("--rl-step-rollouts", type=int, default=64, help="the RL run's rollouts a step (smollm2 preset: 8 x 8)")
    ap.add_argument("--domain", default="arithmetic")
    ap.add_argument("--n-train", type=int, default=400)
    ap.add_argument("--n-eval", type=int, default=100)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--lora", action="store_true")
    ap.add_argument("--engine", default="fast")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--budget", type=int, default=0, help="rollouts; 0: a quarter of the RL run's")
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.smoke:
        a.student, a.teacher, a.engine, a.n_train, a.n_eval = "tiny", smoke_teacher(), "hf", 8, 8
        a.prompts, a.group, a.max_new_tokens, a.budget, a.eval_every, a.lr = 2, 4, 4, 16, 1, 3e-3
    if not a.teacher:
        ap.error("--teacher DIR is required (or --smoke)")
    res = main(a)
    print(json.dumps(res, indent=1, default=thaw))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1, default=thaw))
