"""Gemma 3 270M through the RL recipe with LoRA: steps, wall time, peak memory and held-out before/after.

    posttrain models get gemma3-270m --out models/gemma3          # the base model (no chat template)
    .venv/bin/python benchmarks/gemma3_rl.py [--steps 40] [--prompts 8] [--group 8] [KEY=VALUE ...]

What runs is the real CLI, `posttrain rl` (the same recipe as `posttrain quickstart`), on a copy of
the base model with a chat template, because a base model ships without one and the RL path needs a
template to render prompts and to know where a reply ends. `--template plain` (the default): the prompt
as plain text ("5+4="), the reply right after it, ended by EOS: the format the base model was
pretrained on. `--template turns`: Gemma's `<start_of_turn>user ... <end_of_turn>` format, which the
base model has to learn in the warm-up (30 steps against 5-10 in plain text). The copy hard-links the
weights.

The task: posttrain's `arithmetic` domain at difficulty 0.3 (sums of two numbers up to about 20; one
line, checked by `exact_numeric`; difficulty 1 gives two-digit operands, 2 three-digit addition and
subtraction). The recipe's SFT warm-up on oracle demonstrations (LoRA, trainer.lora: the adapters are
merged into the warmed-up model and RL trains fresh ones) teaches the answer format and stops at a
measured validation level (`recipe.rl.stop_at_pass`, checked every `--check-every` steps on
training-pool tasks, never the held-out split): "before" is the warmed-up model.

Targets (issue 38): 40 steps of 8 prompts x 8 samples in <= 30 minutes of RL and <= 8 GiB peak memory,
with the held-out pass@1 before and after (paired McNemar), on the 2-core CPU; one run per seed (default
0 1 2) and the mean change with a t-interval across seeds. Memory: the process tree's PSS (the sandbox
pool's workers included, shared pages counted once) sampled every 0.5 s, per run and phase, and the
largest RSS of any one process of any run (getrusage). Prints one JSON line per run and one for all, and
writes benchmarks/results/gemma3_rl.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Gemma 3's turn format (its instruction-tuned template, without the system-turn folding and image
# handling): what the base model's vocabulary has special tokens for.
GEMMA_TURNS = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' "
               "else m['role'] }}\n{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
               "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
# A completion-style template for a base model: the prompt as plain text ("5+4="), the reply right after it,
# ended by EOS (the stop token the template's probe finds): the format the base model was pretrained on.
PLAIN = ("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% if m['role'] == 'assistant' %}{{ eos_token }}"
         "{% endif %}{% endfor %}")
TEMPLATES = {"plain": PLAIN, "turns": GEMMA_TURNS}
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def chat_copy(base: Path, out: Path, template: str) -> Path:
    """`base` with `template` as chat_template.jinja; the other files hard-linked (or copied)."""
    if (out / "chat_template.jinja").is_file() and (out / "chat_template.jinja").read_text() == template:
        return out
    missing = [f for f in MODEL_FILES if not (base / f).is_file()]
    if missing:
        sys.exit(f"{base} lacks {', '.join(missing)}: run `posttrain models get gemma3-270m --out {base}` first")
    out.mkdir(parents=True, exist_ok=True)
    for f in MODEL_FILES:
        if not (out / f).exists():
            try:
                os.link(base / f, out / f)
            except OSError:
                (out / f).write_bytes((base / f).read_bytes())
    (out / "chat_template.jinja").write_text(template)
    return out


def overrides(args: argparse.Namespace, model: Path, seed: int) -> list[str]:
    a = args
    return [
        f"model.path={model}", f"seed={seed}", "threads=2",
        f"tasks.domains={{arithmetic: {{n_train: {a.n_train}, n_eval: {a.n_eval}, difficulty: {a.difficulty}}}}}",
        "trainer.lora={r: 16, alpha: 32, target_modules: [q_proj, k_proj, v_proj, o_proj]}",
        f"sft.steps={a.sft_steps}", "sft.batch_size=8", "sft.max_len=64", "sft.optim.lr=5e-4",
        f"recipe.rl.stop_at_pass={a.stop_at}", f"recipe.rl.check_every={a.check_every}", "recipe.rl.val_per_domain=50",
        f"rl.steps={a.steps}", f"rl.prompts_per_step={a.prompts}", f"rl.group_size={a.group}",
        "rl.optim.lr=2e-4", "rl.optim.warmup=3", "rl.micro_tokens=1024", "rl.checkpoint_every=0",
        "eval.max_new_tokens=8", "engine={name: fast, args: {max_batch: 64}}", *a.extra,
    ]


PHASES = (("sft ", "sft"), ("SFT step", "sft"), ("evaluating held-out tasks (before)", "eval_before"),
          ("rl ", "rl"), ("evaluating held-out tasks (after)", "eval_after"))


def tree_pss(pid: int) -> int:
    """Proportional resident bytes (PSS) of `pid` and every descendant (the sandbox pool's workers
    included): a page shared by forked processes counts once in all, where summing RSS would count it
    in each."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                kids.setdefault(int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            pss = next(x for x in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines() if x.startswith("Pss:"))
            total += int(pss.split()[1]) * 1024
        except (OSError, IndexError, ValueError, StopIteration):
            continue
        todo += kids.get(p, [])
    return total


class PhaseMemory:
    """The process tree's peak proportional memory (PSS) per phase of the run, sampled every 0.5 s; the phase is
    the last one the CLI's output started (PHASES), "start" before the first."""

    def __init__(self, pid: int) -> None:
        self.pid, self.phase, self.peaks = pid, "start", {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def saw(self, line: str) -> None:
        self.phase = next((name for prefix, name in PHASES if line.startswith(prefix)), self.phase)

    def _run(self) -> None:
        while not self._done.wait(0.5):
            rss = tree_pss(self.pid)
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), rss)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def peaks_gib(self) -> dict[str, float]:
        return {k: round(v / 2**30, 2) for k, v in self.peaks.items()}


def step_times(run: Path) -> list[float]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [r["time/step_s"] for r in rows if "time/step_s" in r]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", default="models/gemma3")
    ap.add_argument("--template", choices=sorted(TEMPLATES), default="plain",
                    help="plain: the prompt as text, the reply ended by EOS; turns: Gemma's <start_of_turn> format")
    ap.add_argument("--chat-dir", default=None, help="where the copy with the template goes (default models/gemma3-TEMPLATE)")
    ap.add_argument("--out", default="runs/gemma3-rl")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--n-train", type=int, default=800)
    ap.add_argument("--n-eval", type=int, default=200)
    ap.add_argument("--difficulty", type=float, default=0.3)
    ap.add_argument("--sft-steps", type=int, default=300)
    ap.add_argument("--stop-at", type=float, default=0.3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one run each (RUN-sSEED)")
    ap.add_argument("--check-every", type=int, default=5, help="SFT steps between the warm-up's validation checks")
    ap.add_argument("--results", default=str(ROOT / "benchmarks/results/gemma3_rl.json"))
    ap.add_argument("extra", nargs="*", help="more KEY=VALUE overrides for posttrain rl")
    args = ap.parse_args()

    model = chat_copy(Path(args.model_dir), Path(args.chat_dir or f"models/gemma3-{args.template}"), TEMPLATES[args.template])
    runs = [run_one(args, model, seed) for seed in args.seeds]
    deltas = [r["after"]["pass@1"] - r["before"]["pass@1"] for r in runs]
    out = {"runs": runs, "delta_mean": round(statistics.mean(deltas), 4),
           "delta_per_seed": [round(d, 4) for d in deltas],
           "delta_ci95": t_interval(deltas), "rl_s_max": max(r["rl_s"] for r in runs),
           "peak_tree_pss_gib_max": max(r["peak_tree_pss_gib"] for r in runs),
           # the largest RSS of any one process of any run (getrusage of the waited-for children)
           "peak_rss_gib_any_process": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20, 2),
           "command": " ".join(sys.argv)}
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}), flush=True)
    Path(args.results).write_text(json.dumps(out, indent=2))


def t_interval(xs: list[float]) -> list[float] | None:
    """95% t-interval of the mean (None for fewer than 2 values): posttrain's own, each value its own cluster."""
    if len(xs) < 2:
        return None
    from posttrain.eval.stats import clustered_mean_ci

    ci = clustered_mean_ci(xs, range(len(xs)))  # one value per cluster: the plain s / sqrt(n) t-interval
    return [round(ci.low, 4), round(ci.high, 4)]


def run_one(args: argparse.Namespace, model: Path, seed: int) -> dict:
    """One `posttrain rl` run through the CLI; its figures (one JSON line printed)."""
    run = Path(f"{args.out}-s{seed}")
    base = Path(tempfile.mkdtemp()) / "gemma3_rl.yaml"  # the CLI takes a config file: every setting is an override
    base.write_text("name: gemma3-rl\n")
    cmd = [str(ROOT / ".venv/bin/posttrain"), "rl", str(base), "--out", str(run), "--overwrite", *overrides(args, model, seed)]
    print("$", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    mem = PhaseMemory(proc.pid)
    for line in proc.stdout:  # echoed as it comes; each line may start a phase
        print(line, end="", flush=True)
        mem.saw(line)
    rc = proc.wait()
    mem.stop()
    wall = time.perf_counter() - t0
    if rc != 0:
        sys.exit(f"posttrain rl exited {rc}")
    s = json.loads((run / "summary.json").read_text())
    times = step_times(run)
    out = {
        "seed": seed, "model": "gemma3-270m (base)", "template": args.template, "lora": "r16 q,k,v,o", "steps": len(times),
        "shape": f"{args.prompts} x {args.group}", "difficulty": args.difficulty,
        "rl_s": round(s["phase_s"].get("train_s", 0.0), 1),
        "step_s_median": round(sorted(times)[len(times) // 2], 2) if times else None,
        "wall_s": round(wall, 1), "phase_s": {k: round(v, 1) for k, v in s["phase_s"].items()},
        "peak_tree_pss_gib": max(mem.peaks_gib().values(), default=None), "peak_tree_pss_gib_by_phase": mem.peaks_gib(),
        "sft": s.get("sft"),
        "before": s.get("before"), "after": s.get("after"), "p_value": s.get("p_value"), "flips": s.get("flips"),
        "n_tasks": s.get("n_tasks"), "machine": platform.processor() or platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
