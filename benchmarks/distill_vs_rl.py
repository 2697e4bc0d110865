"""On-policy distillation against RL on a real model: how much of an RL teacher's held-out gain a base
student recovers, and with how many rollouts.

    posttrain models get smollm2 --out models/smollm2
    .venv/bin/python benchmarks/distill_vs_rl.py [--seed 2] [--rl-steps 30] [--share 0.25]
    .venv/bin/python benchmarks/distill_vs_rl.py --teacher-run runs/distill-vs-rl/rl   # reuse an RL arm

Both arms run posttrain's own CLIs on SmolLM2-135M-Instruct with LoRA (r 16 on q/k/v/o), on the
unit-conversion task of benchmarks/vs_trl_smollm2.py (the same splits: 200 held-out questions never
trained on, the base at about 0.17), with the same prompts in the same order:

  RL       `posttrain rl`: the side-by-side's GRPO arm (8 prompts x 8 samples x 40 tokens a step, DAPO
           token mean, lr 1e-4), --rl-steps steps, a checkpoint every --every steps. Its last
           checkpoint is the teacher.
  distill  `posttrain distill`: the base student samples 8 prompts x --group samples, the teacher
           scores every sampled token, the student minimises the reverse KL (rl.loss=distill), for
           as many steps as --share of the RL arm's rollouts allow; a checkpoint every --every.

Every checkpoint of both arms goes through the same `posttrain eval` suite (greedy, 40 tokens), so
the two curves are held-out pass@1 against rollouts. recovered = (student - base) / (teacher - base)
at the distillation's last checkpoint, with McNemar (exact) of the student against the base and
against the teacher on the same items, and a paired 95% interval of the student's gain.
Target (issue 43): recovered >= 0.8 with at most a quarter of the RL run's rollouts.
Writes benchmarks/results/distill_vs_rl.json (`--results` to change).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from vs_trl_smollm2 import evaluate, posttrain, read_scores, run_ours, write_data  # noqa: E402  (the side-by-side's task and arm)

from posttrain.eval.stats import mcnemar_exact, paired_delta_ci  # noqa: E402


def checkpoints(run: Path) -> list[tuple[int, Path]]:
    """(step, directory) of every checkpoint of a run, in step order (directories are step-<0-based step>)."""
    found = [(int(p.name.split("-")[1]) + 1, p) for p in (run / "checkpoints").glob("step-*") if p.is_dir()]
    return sorted(found)


def scored(model: str, data: dict, out: Path, reuse: bool) -> list[int]:
    """`evaluate`, or with `reuse` the pass per held-out item of an eval already in `out`."""
    passed = read_scores(data, out) if reuse else None
    return passed if passed is not None else evaluate(model, data, out)


def curve(run: Path, data: dict, out: Path, per_step: int, tag: str, reuse: bool) -> list[dict]:
    """Held-out pass (1/0 per item) of every checkpoint of `run`, with the rollouts it had used."""
    pts = []
    for step, ckpt in checkpoints(run):
        passed = scored(str(ckpt), data, out / f"eval_{tag}-{step}", reuse)
        pts.append({"step": step, "rollouts": step * per_step, "pass@1": round(sum(passed) / len(passed), 4),
                    "heldout": passed})
        print(json.dumps({"arm": tag, **{k: v for k, v in pts[-1].items() if k != "heldout"}}), flush=True)
    return pts


def paired(a: list[int], b: list[int]) -> dict:
    """b against a on the same items: discordant counts, McNemar's exact p, the paired 95% interval of b - a."""
    only_a = sum(1 for x, y in zip(a, b) if x > y)
    only_b = sum(1 for x, y in zip(a, b) if y > x)
    return {"only_first": only_a, "only_second": only_b, "mcnemar_p": mcnemar_exact(only_a, only_b),
            "delta": round((sum(b) - sum(a)) / len(a), 4),
            "delta_ci95": paired_delta_ci([float(x) for x in a], [float(y) for y in b], list(range(len(a)))).as_dict()}


def teacher_alone(teacher: Path, rows: list[dict], prompt_tokens: int, batch: int) -> dict:
    """The teacher's forward inside the run (median seconds a step) against the same forward alone: a batch of
    `batch` rows as long as a step's mean sample (prompt + mean completion), timed 3 times after a warm-up."""
    import statistics

    import torch

    from posttrain.rollout.service_local import load_second_model
    from posttrain.train.batching import token_logprobs

    model, _ = load_second_model(str(teacher))
    model.eval().requires_grad_(False)
    length = prompt_tokens + round(statistics.median(r["completion_tokens/mean"] for r in rows))
    ids = torch.randint(0, model.config.vocab_size, (batch, length))
    times = []
    with torch.no_grad():
        for _ in range(4):
            t0 = time.perf_counter()
            token_logprobs(model, ids, torch.ones_like(ids))
            times.append(time.perf_counter() - t0)
    in_run = statistics.median(r["time/teacher_s"] for r in rows)
    alone = statistics.median(times[1:])
    return {"rows": batch, "tokens_a_row": length, "in_run_s": round(in_run, 3), "alone_s": round(alone, 3),
            "in_run_tokens_per_s": round(batch * length / in_run), "alone_tokens_per_s": round(batch * length / alone),
            "share_of_step": round(statistics.median(r["time/teacher_frac"] for r in rows), 4)}


def prompt_tokens(data: dict) -> int:
    """The mean chat-templated prompt length of the training tasks, in the model's tokens."""
    from posttrain.models.tokenizer_match import load_tokenizer
    from posttrain.rollout.prompting import encode_prompt
    from posttrain.tasks.io import load_tasks

    tasks = load_tasks(data["train"])
    tok = load_tokenizer(data["model"])
    return round(sum(len(encode_prompt(tok, t.prompt)) for t in tasks) / len(tasks))


def run_distill(a: argparse.Namespace, data: dict, teacher: Path, out: Path) -> tuple[Path, int, float]:
    """`posttrain distill` on the base student with the teacher; (run dir, steps, wall seconds)."""
    steps = max(1, int(a.rl_steps * a.prompts * a.group * a.share) // (a.prompts * a.distill_group))
    run = out / "distill"
    if a.reuse and (run / "checkpoints" / f"step-{steps - 1}").is_dir():
        return run, steps, json.loads((run / "summary.json").read_text()).get("wall_s", 0.0)
    cfg = out / "distill.yaml"
    cfg.write_text("name: distill-vs-rl\n")
    overrides = [
        f"model.path={Path(a.model).resolve()}", f"seed={a.seed}", "threads=2", "tasks.domains={}",
        f"tasks.files=[{data['train']}]", "tasks.sft_frac=0", "eval.before=false", "eval.after=false",
        f"distill.teacher.path={teacher}", "distill.eval_kl=false",
        f"rl.steps={steps}", f"rl.prompts_per_step={a.prompts}", f"rl.group_size={a.distill_group}",
        f"rl.max_new_tokens={a.max_new}", "rl.temperature=1.0", "rl.top_p=1.0", "rl.max_grad_norm=1.0",
        f"rl.optim={{lr: {a.distill_lr}, betas: [0.9, 0.999], weight_decay: 0.0, schedule: constant, warmup: 0}}",
        "trainer.lora={r: 16, alpha: 32, dropout: 0.0, target_modules: [q_proj, k_proj, v_proj, o_proj]}",
        f"schedule={{name: fixed_order, args: {{order_file: {data['orders'][a.seed]}}}}}",
        f"rl.checkpoint_every={a.every}", "rl.keep_checkpoints=1000",  # every checkpoint: a point of the curve
    ]
    t0 = time.perf_counter()
    posttrain(["distill", str(cfg), "--out", str(run), "--overwrite", *overrides], out / "distill.log")
    return run, steps, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="models/smollm2")
    ap.add_argument("--out", default="runs/distill-vs-rl")
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--rl-steps", type=int, default=30)
    ap.add_argument("--prompts", type=int, default=8, help="prompts a step, both arms")
    ap.add_argument("--group", type=int, default=8, help="RL samples a prompt")
    ap.add_argument("--distill-group", type=int, default=4, help="distillation samples a prompt")
    ap.add_argument("--share", type=float, default=0.25, help="distillation rollouts as a share of the RL arm's")
    ap.add_argument("--every", type=int, default=5, help="a checkpoint (and a held-out point) every N steps")
    ap.add_argument("--max-new", type=int, default=40)
    ap.add_argument("--lr", type=float, default=1e-4, help="RL learning rate")
    ap.add_argument("--distill-lr", type=float, default=2e-4)
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--n-eval", type=int, default=200)
    ap.add_argument("--difficulty", type=float, default=0.3)
    ap.add_argument("--teacher-run", default=None, help="an RL arm already run (its checkpoints): skip training it")
    ap.add_argument("--reuse", action="store_true",
                    help="read back what a stopped run of this script left in --out (evals, the distillation run)")
    ap.add_argument("--results", default=str(ROOT / "benchmarks/results/distill_vs_rl.json"))
    a = ap.parse_args()
    if not (Path(a.model) / "config.json").is_file():
        sys.exit(f"{a.model}: no model there; run `posttrain models get smollm2 --out {a.model}` first")
    if not 0 < a.share <= 1:
        sys.exit(f"--share {a.share}: a share of the RL rollouts, in (0, 1]")

    out = Path(a.out).resolve()
    # the side-by-side's helpers read these names: its arm's steps, seeds, extra overrides
    a.steps, a.seeds, a.wall_minutes, a.extra = a.rl_steps, [a.seed], None, [f"rl.checkpoint_every={a.every}", "rl.keep_checkpoints=1000"]
    data = write_data(out, a)
    data["model"] = str(Path(a.model).resolve())
    base = scored(a.model, data, out / "eval_base", a.reuse)
    print(json.dumps({"n_train": data["n_train"], "n_eval": data["n_eval"], "base": round(sum(base) / len(base), 4)}),
          flush=True)

    if a.teacher_run or (a.reuse and checkpoints(out / f"ours-s{a.seed}")):
        rl_run = Path(a.teacher_run or out / f"ours-s{a.seed}").resolve()
        rl_arm = {"run": str(rl_run), "reused": True}
    else:
        rl_arm = run_ours(a, data, a.seed, out)
        rl_run = Path(rl_arm["run"])
    if not checkpoints(rl_run):
        sys.exit(f"{rl_run}: no checkpoints; the RL arm must keep them (rl.checkpoint_every)")
    rl_curve = curve(rl_run, data, out, a.prompts * a.group, "rl", a.reuse)
    teacher_step, teacher = checkpoints(rl_run)[-1]
    rl_rollouts = teacher_step * a.prompts * a.group

    run, steps, wall = run_distill(a, data, teacher, out)
    d_curve = curve(run, data, out, a.prompts * a.distill_group, "distill", a.reuse)
    teach, student = rl_curve[-1]["heldout"], d_curve[-1]["heldout"]
    gain_t, gain_s = (sum(teach) - sum(base)) / len(base), (sum(student) - sum(base)) / len(base)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "time/step_s" in r]
    doc = {
        "config": {k: v for k, v in vars(a).items() if k not in ("extra",)},
        "machine": subprocess.run(["sh", "-c", "lscpu | grep 'Model name' | cut -d: -f2"], capture_output=True,
                                  text=True).stdout.strip(),
        "n_eval": len(base), "base": round(sum(base) / len(base), 4),
        "teacher": {"checkpoint": str(teacher), "pass@1": rl_curve[-1]["pass@1"], "rollouts": rl_rollouts},
        "student": {"pass@1": d_curve[-1]["pass@1"], "rollouts": d_curve[-1]["rollouts"], "steps": steps,
                    "wall_s": round(wall, 1)},
        "rollout_share": round(d_curve[-1]["rollouts"] / rl_rollouts, 4),
        "recovered": round(gain_s / gain_t, 4) if gain_t else None,
        "student_vs_base": paired(base, student), "teacher_vs_base": paired(base, teach),
        "student_vs_teacher": paired(teach, student),
        "curves": {"rl": [{k: v for k, v in p.items() if k != "heldout"} for p in rl_curve],
                   "distill": [{k: v for k, v in p.items() if k != "heldout"} for p in d_curve]},
        "distill_train": [{"step": r.get("step"), "reward/mean": r.get("reward/mean"),
                           "reverse_kl": r.get("train/reverse_kl"), "step_s": r.get("time/step_s"),
                           "teacher_s": r.get("time/teacher_s")} for r in rows],
        "rl_arm": {k: v for k, v in rl_arm.items() if k != "heldout"},
        "teacher_cost": teacher_alone(teacher, rows, prompt_tokens(data), a.prompts * a.distill_group),
    }
    print(json.dumps({k: doc[k] for k in ("base", "teacher", "student", "rollout_share", "recovered",
                                          "student_vs_base", "student_vs_teacher")}), flush=True)
    Path(a.results).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
