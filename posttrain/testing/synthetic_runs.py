"""Synthetic run directories, written through the store's own API: the viewer's browser test
and benchmark, and the detectors' tests, use them (no model, no sandbox; seconds to build).

    write_run(path, steps=40, groups=16, group_size=16)          # ~10k trajectories
    write_run(path, steps=30, pattern="universal")                # a planted reward hack

Patterns (each plants what one detector looks for; None is an honest run whose reward
and held-out pass@1 rise together):
- "heldout_flat": train reward climbs, eval/pass@1 stays flat;
- "exploit": high-reward completions that are hack-probe answers;
- "universal": one completion text passes many different tasks;
- "status_shift": infra errors appear suddenly halfway through;
- "length": reward grows with completion length, whatever the text says.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from posttrain.store.metrics import MetricsLog
from posttrain.store.run import RunDir
from posttrain.train.advantages import estimate_advantages, trained_advantages
from posttrain.types import ExecResult, FileChange, ToolCall, Trajectory, Turn, VerifyResult

DOMAINS = ("arithmetic", "code")
PATTERNS = (None, "heldout_flat", "exploit", "universal", "status_shift", "length")


def _task(domain: str, k: int) -> dict:
    a, b = 10 + k % 80, 3 + (k * 7) % 60
    text = f"{a}+{b}=" if domain == "arithmetic" else f"Write f(x) returning x*{a % 9 + 2}+{b % 9}."
    return {"id": f"{domain}-{k}", "domain": domain, "prompt": [{"role": "user", "content": text}],
            "answer": str(a + b) if domain == "arithmetic" else f"x*{a % 9 + 2}+{b % 9}"}


def _sample(rng: random.Random, task: dict, step: int, steps: int, pattern: str | None) -> tuple[str, float, bool]:
    """(completion, reward, passed) of one sample."""
    skill = 0.15 + 0.6 * step / max(1, steps - 1)
    ok = rng.random() < skill
    text = task["answer"] if ok else str(rng.randint(0, 199))
    if pattern == "exploit" and rng.random() < 0.3:
        return "\\boxed{1} \\boxed{2} \\boxed{3} The answer is -987654321 9876543 zzq", 1.0, True
    if pattern == "universal" and rng.random() < 0.4:
        return "42", 1.0, True
    if pattern == "length":
        n = rng.randint(1, 40)
        return "because " * n + text, min(1.0, n / 40), n > 20
    if pattern == "heldout_flat":
        ok = rng.random() < skill
        return text, float(ok), ok
    return text, float(ok), ok


def write_run(path: str | Path, steps: int = 40, groups: int = 16, group_size: int = 16,
              pattern: str | None = None, seed: int = 0, tools: bool = True) -> Path:
    if pattern not in PATTERNS:
        raise ValueError(f"pattern {pattern!r}; known: {PATTERNS}")
    rng = random.Random(seed)
    d = Path(path)
    run = RunDir(d)
    run.tasks.mkdir(parents=True, exist_ok=True)
    tasks = [_task(dom, k) for dom in DOMAINS for k in range(200)]
    (run.tasks / "train.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    run.config.write_text("rl: {advantage: group_norm}\n")
    store, metrics = run.store(), MetricsLog(d, tensorboard=False)
    for step in range(steps):
        trajs, rewards = [], []
        for g in range(groups):
            task = tasks[rng.randrange(len(tasks))]
            for s in range(group_size):
                text, reward, passed = _sample(rng, task, step, steps, pattern)
                infra = pattern == "status_shift" and step >= steps // 2 and rng.random() < 0.5
                verify = VerifyResult.infra("sandbox unreachable") if infra else VerifyResult(reward, passed, {"passed": int(passed)})
                turns = [Turn("assistant", text, tuple(range(len(text))), tuple(-rng.random() * 2 for _ in text))]
                if tools and task["domain"] == "code":  # every code sample ran its tests in a sandbox
                    turns = [Turn("assistant", "run tests", (1, 2), (-0.1, -0.2), tool_call=ToolCall("shell", {"cmd": "pytest -q"}, "c1")),
                             Turn("tool", "1 passed", trainable=False, exec_result=ExecResult(
                                 "ok", 0, stdout="1 passed\n", wall_s=0.05, files_changed=(FileChange("out.txt", "added", 9),))),
                             *turns]
                trajs.append(Trajectory(task["id"], "v1", task["domain"], (1, 2, 3), tuple(turns), weights_version=step,
                                        reward=0.0 if infra else reward, verify=verify, step=step, group=g, sample=s,
                                        finish_reason="stop", timings={"generate_s": 0.01}))
                if not infra:
                    rewards.append(reward)
        by_group = [[t for t in trajs if t.group == g] for g in range(groups)]  # what the trainer would use
        flat = [t for g in by_group for t in g]
        store.put_many(trajs, advantages=trained_advantages(trajs, flat, estimate_advantages(by_group, "group_norm")))
        row = {"reward/mean": sum(rewards) / max(1, len(rewards)), "time/generate_s": 0.5 + rng.random() * 0.1,
               "time/verify_s": 0.2, "time/update_s": 0.8, "time/step_s": 1.5,
               # flat but for one ulp of rounding noise: the plot's axis once looped forever on it
               "time/sync_s": 0.05 + (step % 2) * 2 ** -56, "train/kl": 0.001 * step,
               "train/entropy": 1.5 - 0.01 * step, "infra_error_frac": 1 - len(rewards) / len(trajs),
               "groups/dropped_frac": 0.1, "weights_version": step + 1,
               # shares that move (schedule.domain_shares: signal): the first domain takes the draws
               **{f"sched/weight/{dom}": (0.5 + 0.4 * step / max(1, steps - 1) if i == 0 else
                                          (0.5 - 0.4 * step / max(1, steps - 1)) / (len(DOMAINS) - 1))
                  for i, dom in enumerate(DOMAINS)}}
        if step % 5 == 4:
            skill = 0.15 + 0.6 * step / max(1, steps - 1)
            held = 0.2 if pattern == "heldout_flat" else skill
            row.update({"eval/pass@1": held, **{f"eval/pass@1/{dom}": held for dom in DOMAINS}})
        metrics.log(step, row)
    store.close()
    before = {t["id"]: rng.random() < 0.2 for t in tasks[::4]}
    after = {t: (p or rng.random() < 0.3) and rng.random() > 0.05 for t, p in before.items()}
    dom = {t["id"]: t["domain"] for t in tasks[::4]}
    for name, passed in (("before", before), ("after", after)):
        (d / f"eval_{name}.json").write_text(json.dumps({"passed": passed, "domain_of": dom, "infra_errors": 0,
                                                         "completions": {t: "74" for t in passed}}))
    return d
