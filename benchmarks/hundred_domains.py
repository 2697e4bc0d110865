"""A hundred reasoning-gym domains on SmolLM2-135M-Instruct: curriculum + adaptive weights vs uniform (issue 39).

    .venv/bin/python benchmarks/hundred_domains.py --model models/smollm2                 # the experiment (hours)
    .venv/bin/python benchmarks/hundred_domains.py --model models/smollm2 --smoke         # 3 domains, 2 steps (minutes)
    .venv/bin/python benchmarks/hundred_domains.py --tasks-only --seeds 1 2   # each seed's tasks can be made (minutes)
    # one arm at a time, the second reusing the first's eval before and folding its row into the verdicts:
    .venv/bin/python benchmarks/hundred_domains.py --model models/smollm2 --seeds 0 --arms curriculum --results R.json
    .venv/bin/python benchmarks/hundred_domains.py --model models/smollm2 --seeds 0 --arms uniform --results R.json \
        --merge --reuse-before
    # runs made in another clone or on another machine, folded in (each row carries its verdicts):
    .venv/bin/python benchmarks/hundred_domains.py --fold OTHER.json --results R.json

Both arms run `examples/hundred_domains.yaml` (91 trained rg-* domains, 10 held out, LoRA) through
`run_quickstart` with the RL phase cut at the same wall-time budget (`--budget-s`, default 1800 s), on
the same seeds (`--seeds`, default 0 1 2):
- `curriculum`: `schedule.name=learning_signal`, domain shares that follow each domain's rate of groups
  with signal (`schedule.domain_shares=signal`), plus the per-domain difficulty curriculum;
- `uniform`: `schedule.name=uniform`, the fixed mixture, the same pooled training tasks drawn from every level
  (`schedule.curriculum.steer=false`: nothing moves; the held-out
  split is at difficulty 1 in both arms, so after-RL pass rates compare task by task).
Per run it prints one JSON line: held-out pass@1 before/after (trained domains and held-out domains),
the run's McNemar p, zero-variance group fraction (mean of `groups/dropped_frac`), RL steps, wall.
Then the targets of issue 39, each PASS/MISS with its figures:
- signal: the curriculum arm's zero-variance fraction < 0.4 on average, of every group drawn (what the
  scheduler chose) and of each step's trained batch (what the refill, rl.refill_rounds, left short);
- lift: trained-domain mean rises >= 8 points with McNemar p < 0.01, no domain falling with Holm p < 0.05;
- scheduler: curriculum beats uniform on the pooled paired test over seeds (exact McNemar on the
  after-RL verdicts of the same held-out tasks, trained domains), p < 0.05;
- transfer: the held-out domains' change (after - before) with a 95% task-bootstrap CI, pooled over seeds.
Run on a quiet machine: the budget is wall time, so load changes how many steps an arm gets.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
EXAMPLE = ROOT / "examples" / "hundred_domains.yaml"
# The uniform arm trains on the same task pool (the curriculum's five levels pooled per domain) drawn uniformly:
# at difficulty 1 alone some domains (rg-coin_flip) make too few distinct tasks to leave any after the held-out split.
ARMS = {"curriculum": [], "uniform": ["schedule.name=uniform", "schedule.curriculum.steer=false",
                                      "schedule.domain_shares=mixture"]}
SMOKE = ['tasks.domains={"rg-gcd": {"n_train": 6, "n_eval": 2}, "rg-spell_backward": {"n_train": 6, "n_eval": 2}, '
         '"rg-lcm": {"n_train": 0, "n_eval": 2, "held_out": true}}',
         'schedule.curriculum.exclude=[]', "rl.steps=2", "rl.prompts_per_step=2", "rl.group_size=2",
         "rl.max_new_tokens=8", "eval.max_new_tokens=8", "rl.warmup_steps=0", "schedule.curriculum.min_evidence=2",
         "schedule.curriculum.window=4"]


def sibling_before(out: Path, arm: str, seed: int) -> Path | None:
    """Another arm's eval_before.json for this seed under the same --out, if one was written."""
    found = [out.parent / f"{a}-seed{seed}" / "eval_before.json" for a in ARMS if a != arm]
    return next((f for f in found if f.is_file()), None)


def summary_with_before(cfg, out: Path, before_file: Path) -> dict:
    """The run's summary against a reused eval before (`--reuse-before`): copied into the run dir, then
    compared with the run's own eval after exactly as the recipe compares its two evals."""
    import shutil

    from posttrain.eval.heldout import HeldoutResult
    from posttrain.recipes.quickstart import summarize

    shutil.copyfile(before_file, out / "eval_before.json")
    load = lambda when: HeldoutResult(**{k: v for k, v in json.loads((out / f"eval_{when}.json").read_text()).items()  # noqa: E731
                                         if k in ("passed", "domain_of", "infra_errors")})
    s = summarize(load("before"), load("after"), cfg, out)
    (out / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
    return s


def run_arm(arm: str, seed: int, model: str, out: Path, overrides: list[str], budget_s: float | None,
            reuse_before: bool = False) -> dict:
    from posttrain.config import load_config
    from posttrain.config_check import check_config
    from posttrain.recipes.quickstart import run_quickstart
    from posttrain.store.run_dir import claim_run_dir

    before_file = sibling_before(out, arm, seed) if reuse_before else None
    skip = ["eval.before=false"] if before_file is not None else []
    cfg = load_config(EXAMPLE, [f"model.path={model}", f"seed={seed}", *overrides, *ARMS[arm], *skip])
    check_config(cfg)
    claim_run_dir(out, overwrite=True, command="benchmarks/hundred_domains.py")
    t0 = time.perf_counter()
    s = run_quickstart(cfg, out, rl_budget_s=budget_s)
    if before_file is not None:
        s = summary_with_before(cfg, out, before_file)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    zv = [r["groups/zero_variance_frac"] for r in rows if "groups/zero_variance_frac" in r]
    steps = [r for r in rows if "groups/trained" in r]
    g = s.get("generalisation", {})
    return {"arm": arm, "seed": seed, "trained": g.get("trained_domains"), "held_out": g.get("held_out_domains"),
            "before": s["before"]["pass@1"], "after": s["after"]["pass@1"], "p_value": s["p_value"],
            "domain_p_values": s["domain_p_values"],
            "domain_delta": {d: s["after"]["domains"][d] - b for d, b in s["before"]["domains"].items()},
            "zero_variance_frac": sum(zv) / len(zv) if zv else None, "rl_steps": len(zv),
            "trained_groups_mean": sum(r["groups/trained"] for r in steps) / max(1, len(steps)),
            "prompts_per_step": cfg.rl.prompts_per_step,
            "refill_extra_rollouts": sum(r.get("refill/extra_rollouts", 0) for r in steps),
            "wall_s": round(time.perf_counter() - t0, 1), "run_dir": str(out),
            "before_from": str(before_file) if before_file is not None else None, "verdicts": stored_verdicts(out)}


def stored_verdicts(run_dir: Path) -> dict[str, dict[str, str]]:
    """Every held-out task's verdicts, before and after, as `{domain: {task id: "01"}}` (before, after): the row
    then carries what the pooled tests need, so `--merge` works after the run dirs are gone (they are not in git)."""
    load = lambda when: json.loads((run_dir / f"eval_{when}.json").read_text())  # noqa: E731
    before, after = load("before"), load("after")
    out: dict[str, dict[str, str]] = {}
    for t, d in sorted(after["domain_of"].items()):
        if t in before["passed"] and t in after["passed"]:
            out.setdefault(d, {})[t] = f"{int(before['passed'][t])}{int(after['passed'][t])}"
    return out


def tasks_only(seed: int, overrides: list[str]) -> str:
    """Build one seed's splits as a run would (no model): counts, wall time, and the items a generator did not
    make on its own seed (a failure, or past reasoning_gym.ITEM_LIMIT_S) and made on a later one."""
    from posttrain.config import load_config
    from posttrain.tasks import reasoning_gym as rg
    from posttrain.tasks.splits import make_splits

    moved, made = [], rg.ReasoningGymDomain._made

    def watched(dom, level, args_json, s, size, index):  # the seed asked for, against the one that made it
        t = made(dom, level, args_json, s, size, index)
        if int(t.verifier.args["seed"]) != s:
            moved.append(f"{dom.name} level {level:g} item {index}")
        return t

    rg.ReasoningGymDomain._made = watched
    try:
        t0 = time.perf_counter()
        sp = make_splits(load_config(EXAMPLE, [f"seed={seed}", *overrides]))
    finally:
        rg.ReasoningGymDomain._made = made
    return (f"seed {seed}: {len(sp.train)} training and {len(sp.held_out)} held-out tasks in "
            f"{time.perf_counter() - t0:.0f} s; made on a later seed: {len(moved)} ({'; '.join(moved) or 'none'})")


def _verdicts(row: dict, when: str) -> dict[str, tuple[str, bool]]:
    """{task id: (domain, passed)} at `when` ("before" or "after"): from the row's stored verdicts, else from its run
    dir (rows written before 2026-12-07 stored none)."""
    if row.get("verdicts"):
        i = 0 if when == "before" else 1
        return {t: (d, v[i] == "1") for d, tasks in row["verdicts"].items() for t, v in tasks.items()}
    run = Path(row["run_dir"])
    if not (run / f"eval_{when}.json").is_file():
        return {}
    ev = json.loads((run / f"eval_{when}.json").read_text())
    return {t: (ev["domain_of"][t], p) for t, p in ev["passed"].items()}


def compare_arms(rows: list[dict]) -> dict:
    """Pooled exact McNemar over seeds on the after-RL verdicts of the same held-out tasks (trained domains).

    A seed whose verdicts are gone (no stored verdicts, no run dir) counts by its curriculum row's
    `scheduler_pairs`, the discordant counts its own run printed, where recorded; else it is left out and named."""
    from posttrain.eval.stats import mcnemar_exact

    b = c = n = 0
    used, missing = [], []
    for seed in sorted({r["seed"] for r in rows}):
        arm = {r["arm"]: r for r in rows if r["seed"] == seed}
        if set(arm) != set(ARMS):
            continue
        cur, uni = _verdicts(arm["curriculum"], "after"), _verdicts(arm["uniform"], "after")
        if not (cur and uni):
            rec = arm["curriculum"].get("scheduler_pairs")
            if rec is None:
                missing.append(seed)
                continue
            b, c, n = b + rec["curriculum_only"], c + rec["uniform_only"], n + rec["n_pairs"]
            used.append(seed)
            continue
        trained = set(arm["curriculum"]["trained"]["domains"]) if arm["curriculum"]["trained"] else None
        common = [t for t in cur if t in uni and (trained is None or cur[t][0] in trained)]
        b += sum(cur[t][1] and not uni[t][1] for t in common)
        c += sum(uni[t][1] and not cur[t][1] for t in common)
        n += len(common)
        used.append(seed)
    return {"n_pairs": n, "curriculum_only": b, "uniform_only": c, "p_value": mcnemar_exact(b, c),
            "seeds": used, "seeds_without_verdicts": missing}


def _held_out_pairs(row: dict) -> list[tuple[float, float]]:
    """(before, after) per held-out-domain task. Without verdicts, a row whose summary fixes every pair (nothing
    passed before, so each pass after is a 0 -> 1 pair) gives them from its counts; otherwise none."""
    vb, va = _verdicts(row, "before"), _verdicts(row, "after")
    if vb and va:
        return [(float(vb[t][1]), float(va[t][1])) for t in vb if t in va and vb[t][0] in row["held_out"]["domains"]]
    h = row["held_out"]
    if h["before"] == 0.0:
        up = round(h["after"] * h["n_tasks"])
        return [(0.0, 1.0)] * up + [(0.0, 0.0)] * (h["n_tasks"] - up)
    return []


def transfer(rows: list[dict], arm: str) -> dict:
    """Held-out domains' after - before, pooled over seeds, 95% bootstrap CI over (seed, task)."""
    from posttrain.eval.stats import paired_bootstrap

    before, after, clusters = [], [], []
    for r in rows:
        if r["arm"] != arm or not r["held_out"]:
            continue
        for i, (b, a) in enumerate(_held_out_pairs(r)):
            before.append(b), after.append(a), clusters.append(f"{r['seed']}:{i}")
    boot = paired_bootstrap(before, after, clusters, resamples=5000)
    return {"arm": arm, "n": len(before), "delta": boot.interval.estimate,
            "ci95": [boot.interval.low, boot.interval.high], "p_value": boot.p_value}


def targets(rows: list[dict]) -> list[str]:
    from posttrain.eval.stats import holm

    mark = lambda ok: "PASS" if ok else "MISS"  # noqa: E731
    cur = [r for r in rows if r["arm"] == "curriculum"]
    out = []
    zv = [r["zero_variance_frac"] for r in cur if r["zero_variance_frac"] is not None]
    if zv:
        out.append(f"{mark(sum(zv) / len(zv) < 0.4)} signal, groups drawn: curriculum zero-variance fraction "
                   f"{sum(zv) / len(zv):.3f} (< 0.4)")
        short = [1 - r["trained_groups_mean"] / r["prompts_per_step"] for r in cur]
        extra = sum(r["refill_extra_rollouts"] for r in cur)
        out.append(f"{mark(sum(short) / len(short) < 0.4)} signal, groups trained (after the refill): "
                   f"{sum(short) / len(short):.3f} of each step's prompts_per_step without signal (< 0.4); "
                   f"the refill's extra rollouts: {extra}")
    for r in cur:
        t = r["trained"] or {"delta": r["after"] - r["before"], "p_value": r["p_value"]}
        ps = holm(list(r["domain_p_values"].values()))
        falling = [d for (d, dd), p in zip(r["domain_delta"].items(), ps) if dd < 0 and p < 0.05]
        out.append(f"{mark(t['delta'] >= 0.08 and t['p_value'] < 0.01 and not falling)} lift, seed {r['seed']}: "
                   f"trained-domain delta {t['delta']:+.3f} (McNemar p {t['p_value']:.3g}); falling: {falling or 'none'}")
    if {r["arm"] for r in rows} == set(ARMS):
        cmp = compare_arms(rows)
        better = cmp["curriculum_only"] > cmp["uniform_only"]
        gone = f"; seeds {cmp['seeds_without_verdicts']} left out (no verdicts kept)" if cmp["seeds_without_verdicts"] else ""
        out.append(f"{mark(better and cmp['p_value'] < 0.05 and len(cmp['seeds']) >= 3)} scheduler: curriculum-only passes "
                   f"{cmp['curriculum_only']} vs uniform-only {cmp['uniform_only']} over {cmp['n_pairs']} paired tasks, "
                   f"seeds {cmp['seeds']} (3 needed), pooled McNemar p {cmp['p_value']:.3g}{gone}")
    for arm in ARMS:
        if any(r["arm"] == arm and r["held_out"] for r in rows):
            t = transfer(rows, arm)
            out.append(f"INFO transfer ({arm}): held-out domains {t['delta']:+.3f} [{t['ci95'][0]:+.3f}, "
                       f"{t['ci95'][1]:+.3f}] over {t['n']} (seed, task) pairs")
    return out


def main() -> None:
    from posttrain.builtins import load_builtins

    load_builtins()  # as the CLI does first: load_config checks every registry name it reads
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/smollm2")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--budget-s", type=float, default=1800.0, help="RL wall time per run (equal for both arms)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "hundred_domains")
    ap.add_argument("--smoke", action="store_true", help="3 domains, 2 RL steps, 2 held-out tasks each, one seed")
    ap.add_argument("--results", type=Path, default=None, help="also write every run's row and the verdicts here (JSON)")
    ap.add_argument("--merge", action="store_true", help="fold the rows already in --results (other arms or seeds, "
                    "run earlier: each row carries its verdicts) into the verdicts; a rerun (arm, seed) replaces its row")
    ap.add_argument("--reuse-before", action="store_true",
                    help="an arm whose seed already has another arm's eval_before.json under --out reuses it instead "
                         "of evaluating the same base model again (greedy decoding of the same weights on the same "
                         "tasks and batches: the same verdicts; saves ~16 minutes a run)")
    ap.add_argument("--fold", type=Path, nargs="+", default=[],
                    help="run nothing: fold the rows of these results files (runs made elsewhere) into --results, a "
                         "later (arm, seed) replacing an earlier one, and print the verdicts")
    ap.add_argument("--tasks-only", action="store_true",
                    help="build each seed's training and held-out tasks and stop (minutes, no model)")
    ap.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. threads=2")
    a = ap.parse_args()
    overrides = [*SMOKE, *a.overrides] if a.smoke else a.overrides
    if a.tasks_only:
        for seed in a.seeds:
            print(tasks_only(seed, overrides), flush=True)
        return
    seeds, budget = ([a.seeds[0]], None) if a.smoke else (a.seeds, a.budget_s)
    rows = []
    if (a.merge or a.fold) and a.results is not None and a.results.is_file():
        rows = [r for r in json.loads(a.results.read_text())["rows"] if a.fold or not (r["arm"] in a.arms and r["seed"] in seeds)]
    for f in a.fold:
        new = json.loads(f.read_text())["rows"]
        rows = [r for r in rows if (r["arm"], r["seed"]) not in {(n["arm"], n["seed"]) for n in new}] + new
    for r in rows:  # rows written before they carried verdicts: take them from the run dir while it is there
        if not r.get("verdicts") and (Path(r["run_dir"]) / "eval_after.json").is_file():
            r["verdicts"] = stored_verdicts(Path(r["run_dir"]))
    for seed in [] if a.fold else seeds:
        for arm in a.arms:
            row = run_arm(arm, seed, a.model, a.out / f"{arm}-seed{seed}", overrides, budget, a.reuse_before)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("domain_p_values", "domain_delta")}), flush=True)
    verdicts = targets(rows)
    for line in verdicts:
        print(line, flush=True)
    if a.results is not None:
        a.results.parent.mkdir(parents=True, exist_ok=True)
        kept = json.loads(a.results.read_text())["overrides"] if a.fold and a.results.is_file() else overrides
        a.results.write_text(json.dumps({"rows": rows, "targets": verdicts, "overrides": kept}, indent=1) + "\n")


if __name__ == "__main__":
    main()
