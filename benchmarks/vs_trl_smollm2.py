"""posttrain's RL against TRL's GRPOTrainer on a real model: SmolLM2-135M-Instruct with LoRA.

    .venv/bin/pip install trl==1.16.0                      # the `bench` extra's TRL; never a library dependency
    posttrain models get smollm2 --out models/smollm2
    .venv/bin/python benchmarks/vs_trl_smollm2.py [--steps 30] [--seeds 0 1 2] [--difficulty 0.5]
    .venv/bin/python benchmarks/vs_trl_smollm2.py --calibrate 0.2 0.5 0.8    # base pass rate per difficulty

The task: unit conversion ("How many centimeters are in 7 meters?"; at higher difficulty the
other way round, "How many kilometers are 9000 meters?"), a number checked by posttrain's
`math_answer` verifier (the last number of the reply; tolerance 1e-6). Not plain arithmetic:
the model has to know the factor and which way it goes. `--difficulty` widens the values and
mixes in the reverse direction; `--calibrate` prints SmolLM2's greedy held-out pass rate at
each level so the run sits at the model's edge (the issue asks for a base rate of 0.15-0.4).

Both sides, one after the other on this machine, with the same:
  model    SmolLM2-135M-Instruct (fp32), LoRA r 16, alpha 32, dropout 0 on q/k/v/o_proj
  prompts  the same chat template; step s trains on the same P tasks, in the same order
           (posttrain: schedule fixed_order; TRL: the dataset in step order, shuffle_dataset off)
  sampling G samples a prompt, temperature 1, top_p 1, at most --max-new tokens
  reward   posttrain's `math_answer` verifier (TRL: `trl_reward_func()`, the same code), a
           truncated reply scored as it is (rl.overlong=score; TRL's default)
  loss     DAPO token mean over every sampled token (rl.loss_norm=all_tokens; TRL loss_type
           dapo), clip 0.2 both ways, beta 0, advantages (r - mean) / (std + eps) per group, one
           update per batch, max grad norm 1
  optim    AdamW lr --lr, betas (0.9, 0.999), no weight decay, constant, no warm-up
  threads  2; TRL without gradient checkpointing and without bf16 (its CPU defaults turn both on:
           checkpointing would trade its speed for memory, bf16 would change the numerics);
           `--trl-bf16` runs TRL with bf16=True, the like-for-like peer of posttrain's bf16 arm
           ("engine={name: fast, args: {matmul_dtype: auto}}" rl.old_logprobs=recompute: bf16
           rollouts and, under trainer.precision auto, a bf16-autocast update)
posttrain runs its own CLI (`posttrain rl`, nothing patched); TRL runs in a worker process of
this script. Both final models are scored by the same `posttrain eval` suite: the held-out tasks,
greedy, --max-new tokens, a reply cut at the budget scores 0.

Per step: time split (posttrain: generate, verify, forward, backward, optimizer, sync, from its
metrics; TRL: generation, reward, forward (compute_loss), backward, optimizer, from wrapped
methods), peak proportional memory of each side's process tree (PSS, sampled every 0.5 s), and
held-out pass@1 at equal steps: per seed (McNemar on the same items) and paired across seeds (t).
`--wall-minutes 30 --steps 2000` is the equal-wall-time arm: each side trains until 30 minutes of its
training loop have passed (posttrain: recipe.rl.rl_minutes; TRL: a callback), then both are scored
the same way. Writes benchmarks/results/vs_trl_smollm2.json (`--results` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gemma3_rl import PhaseMemory, t_interval  # noqa: E402  (the process-tree PSS sampler)

# (larger unit, smaller unit, how many smaller in one larger): powers of ten, so that what is learned is
# the factor and the direction, not multi-digit multiplication (with 60s and 12s SmolLM2's products are
# mostly wrong: 7% at any difficulty)
UNITS = [("kilometers", "meters", 1000), ("meters", "centimeters", 100), ("centimeters", "millimeters", 10),
         ("meters", "millimeters", 1000), ("kilograms", "grams", 1000), ("grams", "milligrams", 1000),
         ("liters", "milliliters", 1000), ("dollars", "cents", 100), ("kilowatts", "watts", 1000),
         ("decades", "years", 10), ("centuries", "years", 100), ("tonnes", "kilograms", 1000)]
LORA = {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}


def make_splits(n_train: int, n_eval: int, difficulty: float) -> tuple[list, list]:
    """(train, held-out) unit-conversion tasks: every distinct question at `difficulty` once, shuffled,
    the first `n_eval` held out, so no held-out question is ever trained on. Difficulty 0: 1-9 of the
    larger unit, larger -> smaller only; 1: 1-99, and half of the questions smaller -> larger."""
    from posttrain.types import Limits, Message, Spec, Task

    top = 9 + int(round(90 * max(0.0, min(1.0, difficulty))))
    forward = [(b, s, k, v, False) for b, s, k in UNITS for v in range(1, top + 1)]
    rng = random.Random(f"units:{difficulty}")
    n_rev = round(len(forward) * (difficulty / 2) / (1 - difficulty / 2)) if difficulty < 2 else len(forward)
    reverse = rng.sample([(b, s, k, v, True) for b, s, k, v, _ in forward], min(n_rev, len(forward)))
    combos = forward + reverse
    rng.shuffle(combos)
    tasks = []
    for i, (big, small, k, v, rev) in enumerate(combos):
        q, answer = (f"How many {big} are {v * k} {small}?", v) if rev else (f"How many {small} are in {v} {big}?", v * k)
        split = "heldout" if i < n_eval else "train"
        tasks.append(Task(id=f"units-{split}-{i}", domain="units", verifier=Spec("math_answer", {"answer": str(answer)}),
                          prompt=(Message("user", q + " Answer with the number only."),), difficulty=difficulty,
                          limits=Limits(max_steps=1, max_new_tokens=64), oracle=str(answer),
                          metadata={"answer_format": "text"}))  # the verifier alone decides (TRL's reward: the same)
    if len(tasks) < n_eval + 50:
        sys.exit(f"difficulty {difficulty} has {len(tasks)} distinct questions: too few for {n_eval} held out")
    return tasks[n_eval:n_eval + n_train], tasks[:n_eval]


def write_data(out: Path, a: argparse.Namespace) -> dict:
    """train.jsonl, heldout.jsonl, one order file per seed, and the eval suite; their paths."""
    from posttrain.tasks.io import save_tasks

    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    train, held = make_splits(a.n_train, a.n_eval, a.difficulty)
    save_tasks(train, out / "train.jsonl")
    save_tasks(held, out / "heldout.jsonl")
    orders = {}
    for seed in a.seeds:  # step s: P distinct tasks; an epoch is a shuffle of the training set
        rng, ids, rows = random.Random(seed), [t.id for t in train], []
        pool: list[str] = []
        for _ in range(a.steps):
            if len(pool) < a.prompts:
                more = ids[:]
                rng.shuffle(more)
                pool += more
            rows.append(pool[:a.prompts])
            pool = pool[a.prompts:]
        orders[seed] = out / f"order-s{seed}.json"
        orders[seed].write_text(json.dumps(rows))
    suite = out / "heldout_suite.yaml"
    suite.write_text(json.dumps({"name": "units_heldout", "epochs": 1, "seed": 0,
                                 "sampling": {"temperature": 0.0, "max_new_tokens": a.max_new},
                                 "tasks": [{"file": str(out / "heldout.jsonl")}]}))
    return {"train": out / "train.jsonl", "heldout": out / "heldout.jsonl", "orders": orders, "suite": suite,
            "n_train": len(train), "n_eval": len(held)}


def posttrain(args: list[str], log: Path) -> subprocess.CompletedProcess:
    cmd = [str(ROOT / ".venv/bin/posttrain"), *args]
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"`{' '.join(cmd)}` failed ({proc.returncode}); see {log}")
    return proc


def evaluate(model: str, data: dict, out: Path) -> list[int]:
    """Greedy held-out pass (1/0) per task, in heldout.jsonl's order, by `posttrain eval`."""
    posttrain(["eval", "--model", model, "--suite", str(data["suite"]), "--out", str(out), "--no-cache", "--overwrite"],
              out.with_suffix(".log"))
    passed = read_scores(data, out)
    assert passed is not None, f"{out}: the eval left held-out tasks unscored"
    return passed


def read_scores(data: dict, out: Path) -> list[int] | None:
    """The pass (1/0) per held-out task of the eval in `out`, in heldout.jsonl's order; None when any is missing."""
    if not (out / "samples.jsonl").is_file():
        return None
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines() if x.strip()]
    by_id = {r["task_id"]: int(bool(r["passed"])) for r in rows}
    ids = [json.loads(x)["id"] for x in data["heldout"].read_text().splitlines() if x.strip()]
    return [by_id[i] for i in ids] if all(i in by_id for i in ids) else None


def run_ours(a: argparse.Namespace, data: dict, seed: int, out: Path) -> dict:
    run = out / f"ours-s{seed}"
    cfg = out / "ours.yaml"
    cfg.write_text("name: vs-trl-smollm2\n")
    overrides = [
        f"model.path={Path(a.model).resolve()}", f"seed={seed}", "threads=2", "tasks.domains={}",
        f"tasks.files=[{data['train']}]", "tasks.sft_frac=0", "sft.steps=0", "eval.before=false", "eval.after=false",
        f"rl.steps={a.steps}", f"rl.prompts_per_step={a.prompts}", f"rl.group_size={a.group}",
        f"rl.max_new_tokens={a.max_new}", "rl.temperature=1.0", "rl.top_p=1.0",
        "rl.loss={name: dapo, args: {clip_eps: 0.2, clip_eps_high: 0.2}}", "rl.loss_norm=all_tokens",
        "rl.overlong.name=score", "rl.kl_coef=0", "rl.format_weight=0", "rl.max_grad_norm=1.0",
        f"rl.optim={{lr: {a.lr}, betas: [0.9, 0.999], weight_decay: 0.0, schedule: constant, warmup: 0}}",
        f"trainer.lora={{r: {LORA['r']}, alpha: {LORA['alpha']}, dropout: 0.0, target_modules: {LORA['target_modules']}}}",
        f"schedule={{name: fixed_order, args: {{order_file: {data['orders'][seed]}}}}}",
        "rl.checkpoint_every=0", *([f"recipe.rl.rl_minutes={a.wall_minutes}"] if a.wall_minutes else []), *a.extra,
    ]
    cmd = [str(ROOT / ".venv/bin/posttrain"), "rl", str(cfg), "--out", str(run), "--overwrite", *overrides]
    wall, peak = run_measured(cmd, out / f"ours-s{seed}.log", "posttrain rl")
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "time/step_s" in r]
    split = {k: statistics.median(r.get(f"time/{k}_s", 0.0) for r in rows)
             for k in ("step", "generate", "verify", "update", "forward", "backward", "optimizer", "sync")}
    return {"side": "posttrain", "seed": seed, "steps": len(rows), "wall_s": round(wall, 1), "run": str(run),
            "median_s": {k: round(v, 3) for k, v in split.items()},
            "mean_step_s": round(statistics.mean(r["time/step_s"] for r in rows), 3),
            "reward_mean": [round(r["reward/mean"], 4) for r in rows],
            "peak_pss_gib": peak, "model": str(run)}


def run_trl(a: argparse.Namespace, data: dict, seed: int, out: Path) -> dict:
    res = out / f"trl-s{seed}.json"
    cmd = [str(ROOT / ".venv/bin/python"), str(Path(__file__).resolve()), "--trl-worker", str(res), "--seed-one",
           str(seed), "--data-dir", str(out), "--model", a.model, "--steps", str(a.steps), "--prompts", str(a.prompts),
           "--group", str(a.group), "--max-new", str(a.max_new), "--lr", str(a.lr),
           *(["--wall-minutes", str(a.wall_minutes)] if a.wall_minutes else []), *(["--trl-bf16"] if a.trl_bf16 else [])]
    wall, peak = run_measured(cmd, out / f"trl-s{seed}.log", "the TRL worker")
    doc = json.loads(res.read_text())
    doc.update(wall_s=round(wall, 1), peak_pss_gib=peak)
    return doc


def run_measured(cmd: list[str], log: Path, what: str) -> tuple[float, float]:
    """Run `cmd` (output to `log`); (wall seconds, peak PSS GiB of its process tree). Exits naming `log` on failure."""
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        mem = PhaseMemory(proc.pid)
        rc = proc.wait()
        mem.stop()
    if rc != 0:
        sys.exit(f"{what} failed ({rc}); see {log}")
    return time.perf_counter() - t0, round(max(mem.peaks.values(), default=0) / 2**30, 2)


def trl_worker(a: argparse.Namespace) -> None:
    """One TRL GRPOTrainer run (the set-up in the module doc); writes its timings and the merged model."""
    import torch

    torch.set_num_threads(2)
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from posttrain.tasks.io import load_tasks
    from posttrain.verifiers.trl_export import tasks_to_trl_rows, trl_reward_func

    d = Path(a.data_dir)
    by_id = {t.id: t for t in load_tasks(d / "train.jsonl")}
    order = json.loads((d / f"order-s{a.seed_one}.json").read_text())[:a.steps]
    ds = Dataset.from_list(tasks_to_trl_rows([by_id[i] for line in order for i in line]))  # step s: rows sP..sP+P-1
    tok = AutoTokenizer.from_pretrained(a.model)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    out_dir = d / f"trl-s{a.seed_one}"
    cfg = GRPOConfig(
        output_dir=str(out_dir / "trainer"), use_cpu=True, bf16=a.trl_bf16, gradient_checkpointing=False, seed=a.seed_one,
        per_device_train_batch_size=a.prompts * a.group, num_generations=a.group, max_completion_length=a.max_new,
        max_steps=a.steps, learning_rate=a.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
        adam_beta1=0.9, adam_beta2=0.999, max_grad_norm=1.0, loss_type="dapo", beta=0.0, epsilon=0.2,
        temperature=1.0, top_p=1.0, shuffle_dataset=False, scale_rewards="group", mask_truncated_completions=False,
        logging_steps=1, save_strategy="no", report_to=[], disable_dropout=True, dataloader_num_workers=0)
    lora = LoraConfig(r=LORA["r"], lora_alpha=LORA["alpha"], lora_dropout=0.0, target_modules=LORA["target_modules"],
                      task_type="CAUSAL_LM")
    reward = trl_reward_func()  # each row's task names its verifier: math_answer, as on our side
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=cfg, train_dataset=ds, processing_class=tok,
                          peft_config=lora)

    clock: dict[str, float] = {}
    steps: list[dict[str, float]] = []

    def timed(name, fn):
        def wrapper(*args, **kw):
            t = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                clock[name] = clock.get(name, 0.0) + time.perf_counter() - t
        return wrapper

    trainer._generate = timed("generate", trainer._generate)
    trainer._calculate_rewards = timed("reward", trainer._calculate_rewards)
    trainer.compute_loss = timed("forward", trainer.compute_loss)
    trainer.accelerator.backward = timed("backward", trainer.accelerator.backward)
    rewards: list[float] = []

    class Timing(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            clock.clear()
            clock["_t0"] = time.perf_counter()

        def on_pre_optimizer_step(self, args, state, control, **kw):
            clock["_opt"] = time.perf_counter()

        def on_optimizer_step(self, args, state, control, **kw):
            clock["optimizer"] = time.perf_counter() - clock["_opt"]

        def on_step_end(self, args, state, control, **kw):
            row = {k: v for k, v in clock.items() if not k.startswith("_")}
            row["step"] = time.perf_counter() - clock["_t0"]
            steps.append(row)
            if a.wall_minutes and time.perf_counter() - t0 >= a.wall_minutes * 60:  # posttrain's rule: stop past the budget
                control.should_training_stop = True

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                rewards.append(float(logs["reward"]))

    t0 = time.perf_counter()  # the wall-time budget counts from here, as posttrain's from its RL loop's start
    trainer.add_callback(Timing())
    trainer.train()
    train_s = time.perf_counter() - t0
    merged = trainer.model.merge_and_unload()
    merged.save_pretrained(out_dir / "model")
    tok.save_pretrained(out_dir / "model")
    keys = ("step", "generate", "reward", "forward", "backward", "optimizer")
    Path(a.trl_worker).write_text(json.dumps({
        "side": "trl", "seed": a.seed_one, "steps": len(steps), "train_s": round(train_s, 1),
        "median_s": {k: round(statistics.median(r.get(k, 0.0) for r in steps), 3) for k in keys},
        "mean_step_s": round(statistics.mean(r["step"] for r in steps), 3), "reward_mean": rewards,
        "model": str(out_dir / "model"), "trl": __import__("trl").__version__}))


def machine_name() -> str:
    """lscpu's model name of this machine (the results files record it beside every time)."""
    return subprocess.run(["sh", "-c", "lscpu | grep 'Model name' | cut -d: -f2"], capture_output=True,
                          text=True).stdout.strip()


def mcnemar(a: list[int], b: list[int]) -> dict:
    """Discordant pairs of two pass lists on the same items and the exact McNemar p (posttrain.eval.stats)."""
    from posttrain.eval.stats import mcnemar_exact

    ab = sum(1 for x, y in zip(a, b) if x and not y)
    ba = sum(1 for x, y in zip(a, b) if y and not x)
    return {"a_only": ab, "b_only": ba, "p": mcnemar_exact(ab, ba)}


def paired_heldout(a: dict[int, list[int]], b: dict[int, list[int]]) -> dict:
    """Two sides' held-out pass lists on the same items, {seed: [0/1 per item]} each: per seed the pass@1 of
    both, their difference (a - b) and the exact McNemar p; across seeds the mean difference, its 95%
    t-interval and the paired t-test's p (2+ seeds)."""
    seeds = list(a)
    pa = [sum(a[s]) / len(a[s]) for s in seeds]
    pb = [sum(b[s]) / len(b[s]) for s in seeds]
    diffs = [x - y for x, y in zip(pa, pb)]
    out = {"seeds": seeds, "pass_a": [round(x, 4) for x in pa], "pass_b": [round(x, 4) for x in pb],
           "pass_diff": [round(x, 4) for x in diffs], "pass_diff_mean": round(statistics.mean(diffs), 4),
           "pass_diff_ci95": t_interval(diffs), "mcnemar": {s: mcnemar(a[s], b[s]) for s in seeds}}
    if len(seeds) >= 2:
        from scipy.stats import ttest_rel

        t = ttest_rel(pa, pb)
        out["paired_t_p"] = None if t.pvalue != t.pvalue else round(float(t.pvalue), 4)
    return out


def calibrate(a: argparse.Namespace) -> None:
    for level in a.calibrate:
        a.difficulty = level
        out = Path(a.out) / f"calibrate-{level}"
        data = write_data(out, a)
        passed = evaluate(a.model, data, out / "eval_base")
        print(json.dumps({"difficulty": level, "n": len(passed), "base_pass@1": round(sum(passed) / len(passed), 3)}),
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="models/smollm2")
    ap.add_argument("--out", default="runs/vs-trl-smollm2")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per step (P)")
    ap.add_argument("--group", type=int, default=8, help="samples per prompt (G)")
    ap.add_argument("--max-new", type=int, default=40, help="completion token budget")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--n-eval", type=int, default=200)
    ap.add_argument("--difficulty", type=float, default=0.3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--sides", nargs="+", default=["trl", "posttrain"], choices=["trl", "posttrain"])
    ap.add_argument("--wall-minutes", type=float, default=None,
                    help="equal wall time: each side trains this many minutes (--steps then only caps the steps)")
    ap.add_argument("--calibrate", type=float, nargs="*", default=None, help="difficulties: print base pass rates, train nothing")
    ap.add_argument("--results", default=str(ROOT / "benchmarks/results/vs_trl_smollm2.json"))
    ap.add_argument("--trl-bf16", action="store_true",
                    help="TRL with bf16=True (its CPU default: autocast), beside posttrain's bf16 rollouts and update")
    ap.add_argument("--trl-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--seed-one", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", default=None, help=argparse.SUPPRESS)
    ap.add_argument("extra", nargs="*", help="more KEY=VALUE overrides for posttrain rl")
    a = ap.parse_args()
    if a.trl_worker:
        return trl_worker(a)
    if not (Path(a.model) / "config.json").is_file():
        sys.exit(f"{a.model}: no model there; run `posttrain models get smollm2 --out {a.model}` first")
    if "trl" in a.sides:
        try:
            import trl  # noqa: F401
        except ImportError:
            sys.exit("TRL is not installed: .venv/bin/pip install trl==1.16.0 (the `bench` extra)")
    if a.calibrate is not None:
        return calibrate(a)

    out = Path(a.out).resolve()
    data = write_data(out, a)
    base = evaluate(a.model, data, out / "eval_base")
    print(json.dumps({"n_train": data["n_train"], "n_eval": data["n_eval"], "base_pass@1": round(sum(base) / len(base), 3)}),
          flush=True)
    runs = []
    for i, seed in enumerate(a.seeds):
        sides = a.sides if i % 2 == 0 else a.sides[::-1]  # alternate which side runs first
        for side in sides:
            r = run_trl(a, data, seed, out) if side == "trl" else run_ours(a, data, seed, out)
            r["heldout"] = evaluate(r["model"], data, out / f"eval_{side}-s{seed}")
            r["pass@1"] = round(sum(r["heldout"]) / len(r["heldout"]), 4)
            print(json.dumps({k: v for k, v in r.items() if k not in ("heldout", "reward_mean")}), flush=True)
            runs.append(r)
    doc = {"config": {k: v for k, v in vars(a).items() if k not in ("trl_worker", "seed_one", "data_dir")},
           "n_train": data["n_train"], "n_eval": data["n_eval"], "base_pass@1": round(sum(base) / len(base), 4),
           "machine": machine_name(), "runs": [{k: v for k, v in r.items() if k != "heldout"} for r in runs]}
    if set(a.sides) == {"trl", "posttrain"}:
        per = {(r["side"], r["seed"]): r for r in runs}
        seeds = a.seeds
        held = paired_heldout({s: per["posttrain", s]["heldout"] for s in seeds}, {s: per["trl", s]["heldout"] for s in seeds})
        doc["paired"] = {
            "step_time_ratio": [round(per["posttrain", s]["mean_step_s"] / per["trl", s]["mean_step_s"], 3) for s in seeds],
            "peak_pss_ratio": [round(per["posttrain", s]["peak_pss_gib"] / per["trl", s]["peak_pss_gib"], 3) for s in seeds],
            "pass_diff_ours_minus_trl": held["pass_diff"], "pass_diff_mean": held["pass_diff_mean"],
            "pass_diff_ci95": held["pass_diff_ci95"], "mcnemar_ours_vs_trl": held["mcnemar"],
            "mcnemar_vs_base": {f"{side}-s{s}": mcnemar(per[side, s]["heldout"], base) for side in a.sides for s in seeds},
        }
        if "paired_t_p" in held:
            doc["paired"]["paired_t_p"] = held["paired_t_p"]
        print(json.dumps(doc["paired"]), flush=True)
    Path(a.results).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
