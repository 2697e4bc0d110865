"""The vision quickstart: SFT -> eval -> RL -> eval -> McNemar on image tasks, with controls.

    summary = run_vision_quickstart(vision_config(), Path("runs/vision-quickstart"))

1. seeded train tasks and a disjoint held-out split for chart, ui and drawing (32x32 images)
2. build the tiny VLM (LLaVA: SigLIP + tiny Llama), pretrain its tower on the train images,
   pixels only (tower_pretrain.py), save_pretrained, load through the Auto classes
3. SFT warm-up on oracle answers (vision_sft.py)
4. held-out greedy pass@1 before RL, on the real images and under two controls:
   - `blank`: the same tasks with the image replaced by a white one of the same size
   - `alt_text`: no image at all; the prompt is the image's data-free alt text + the question
5. GRPO-family RL (rl.py, unchanged: rollouts, rewards, update and sync are image-aware)
6. the same three evaluations after RL; paired exact McNemar tests:
   before vs after (the gain), after vs after-blank (the answer comes from the pixels),
   alt-text before vs after (text alone must not carry the gain)

Uses the `fast` engine (image prompts prefilled from the VLM's features, decode on the CPU
kernels): about 3x faster than `hf` here, which buys 1500 RL steps in about 4 minutes
(docs/benchmarks.md "Vision"). `engine.name=hf` gives the reference engine.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Sequence

from posttrain.config import RunConfig, load_config
from posttrain.eval.heldout import HeldoutResult, evaluate_heldout, paired_mcnemar
from posttrain.recipes.pipeline import Report, RunContext, recipe
from posttrain.recipes.presets import load_preset
from posttrain.store.run import SUMMARY, RunDir
from posttrain.tasks.splits import Splits, make_splits
from posttrain.train.vision_base import build_base_vlm
from posttrain.types import Message, Task

VISION_DEFAULTS: dict[str, Any] = load_preset("vision")  # presets/vision.yaml


def vision_config(path: str | Path | None = None, overrides: list[str] = ()) -> RunConfig:
    """The vision quickstart's config: VISION_DEFAULTS, then the YAML file, then dotted overrides."""
    return load_config(path, list(overrides), base=json.loads(json.dumps(VISION_DEFAULTS)))


def blank_task(task: Task) -> Task:
    """The same task with each image replaced by a white image of the same size."""
    from PIL import Image

    from posttrain.tasks.images import open_image, png_bytes, store_image

    msgs = []
    for m in task.prompt:
        atts = tuple(store_image(png_bytes(Image.new("RGB", open_image(a).size, "white")), persist=False)
                     for a in m.attachments)
        msgs.append(dataclasses.replace(m, attachments=atts))
    return dataclasses.replace(task, id=task.id + "/blank", prompt=tuple(msgs))


def alt_text_task(task: Task) -> Task:
    """Text only: the image's alt text (kind and labels, no values) then the question."""
    alt = str(task.metadata.get("alt_text", "an image"))
    last = task.prompt[-1]
    msgs = [*task.prompt[:-1], Message(last.role, f"{alt}. {last.content}")]
    return dataclasses.replace(task, id=task.id + "/alt", prompt=tuple(msgs))


def sft_phase(cfg: RunConfig, run_dir: Path, train: list[Task], report: Report,
              base: tuple[Any, Any]) -> tuple[Any, Any]:
    from posttrain.models.vlm import load_vlm, save_vlm
    from posttrain.train.vision_sft import vision_sft_train

    out = RunDir(run_dir).sft_model
    if (out / "config.json").is_file():
        return load_vlm(out)
    model, tok = base
    losses, errors = vision_sft_train(model, tok, train, cfg.sft, seed=cfg.seed,
                                      on_step=lambda s, l: report("sft", {"step": s + 1, "total": cfg.sft.steps, "loss": l}))
    (run_dir / "sft_losses.json").write_text(json.dumps({"losses": losses, "prompt_errors": errors[:20]}))
    save_vlm(model, tok, out)
    return model, tok


async def evaluate_conditions(engine: Any, tok: Any, held: list[Task], runner: Any, max_new: int,
                              report: Report, name: str) -> dict[str, HeldoutResult]:
    """Greedy pass@1 on the real images, with blanked images, and on alt text alone."""
    out = {}
    for cond, make in (("image", lambda t: t), ("blank", blank_task), ("alt_text", alt_text_task)):
        report("eval", {"name": f"{name}/{cond}", "n": len(held)})
        tasks = [make(t) for t in held]
        res = await evaluate_heldout(engine, tok, tasks, runner, max_new)
        base = {t.id: h.id for t, h in zip(tasks, held)}  # pair every condition on the original task id
        out[cond] = HeldoutResult({base[k]: v for k, v in res.passed.items()},
                                  {base[k]: v for k, v in res.domain_of.items()},
                                  res.trajectories if cond == "image" else [], res.infra_errors)
    return out


def answers_of(res: HeldoutResult) -> dict[str, str]:
    """Task id -> the stripped answer text of its (single-turn) held-out trajectory."""
    return {t.task_id: (t.turns[-1].text if t.turns else "").strip() for t in res.trajectories}


def question_breakdown(held: list[Task], before: HeldoutResult, after: HeldoutResult) -> dict[str, dict]:
    """Pass@1 per question type (`domain/metadata.question`) before and after RL, with how
    concentrated the answers are: `top_share` is the share of the most common answer. A type
    answered by one constant (top_share near 1) is answered from the prior, not the pixels,
    and RL can only move which constant; the headline mean hides that."""
    import collections

    groups: dict[str, list[str]] = collections.defaultdict(list)
    for t in held:
        groups[f"{t.domain}/{t.metadata.get('question', '?')}"].append(t.id)
    answers = {"from": answers_of(before), "to": answers_of(after)}
    out = {}
    for key, ids in sorted(groups.items()):
        row: dict[str, Any] = {"n": len(ids)}
        for when, res in (("from", before), ("to", after)):
            got = answers[when]
            scored = [i for i in ids if i in res.passed]
            row[when] = sum(res.passed[i] for i in scored) / len(scored) if scored else float("nan")
            texts = [got[i] for i in ids if i in got]
            common = collections.Counter(texts).most_common(1)
            row[f"top_share_{when}"] = common[0][1] / len(texts) if texts else float("nan")
            row[f"top_answer_{when}"] = common[0][0] if common else ""
        out[key] = row
    return out


def _cmp(a: HeldoutResult, b: HeldoutResult) -> dict:
    p = paired_mcnemar(a, b)
    return {"from": a.mean_over_domains(), "to": b.mean_over_domains(), "delta": b.mean_over_domains() - a.mean_over_domains(),
            "p_value": p.p_value, "n": p.n, "fail_to_pass": p.after_only, "pass_to_fail": p.before_only,
            "domains": {d: {"from": a.pass_at_1(d), "to": b.pass_at_1(d), "p_value": paired_mcnemar(a, b, d).p_value}
                        for d in sorted(a.by_domain())}}


def summarize(before: dict[str, HeldoutResult], after: dict[str, HeldoutResult]) -> dict:
    return {
        "rl_gain": _cmp(before["image"], after["image"]),
        "blank_control": _cmp(after["blank"], after["image"]),  # to - from = what the pixels add after RL
        "alt_text_control": _cmp(before["alt_text"], after["alt_text"]),  # RL gain with text alone
        "pass@1": {f"{when}/{c}": r.mean_over_domains() for when, d in (("before", before), ("after", after))
                   for c, r in d.items()},
        "infra_errors": {f"{w}/{c}": r.infra_errors for w, d in (("before", before), ("after", after)) for c, r in d.items()},
    }


def run_vision_quickstart(cfg: RunConfig, run_dir: Path, report: Report | None = None) -> dict:
    """The `vision` recipe through the one pipeline (recipes/pipeline.py)."""
    from posttrain.recipes.pipeline import run_recipe

    return run_recipe("vision", cfg, Path(run_dir), report=report)


@recipe("vision")
class VisionRL:
    """Image tasks on the tiny VLM, with the blank-image and alt-text controls (module docstring)."""

    title = "posttrain quickstart --vision"
    summary_file = SUMMARY
    sandboxed = False  # chart, ui and drawing are checked in process
    resumable = False

    def splits(self, cfg: RunConfig) -> Splits:
        return make_splits(cfg, images=True)

    async def base(self, ctx: RunContext) -> tuple[Any, Any]:
        assert ctx.splits is not None
        ctx.extra["c0"] = time.process_time()
        return build_base_vlm(ctx.cfg, ctx.run_dir, ctx.splits.train, ctx.report)  # tower pretrained on train images

    async def warm_up(self, ctx: RunContext) -> tuple[Any, Any]:
        assert ctx.splits is not None
        model, tok = sft_phase(ctx.cfg, ctx.run_dir, ctx.splits.train, ctx.report, (ctx.model, ctx.tok))
        if ctx.cfg.model.vision is not None:  # the decode budget for every image prompt of this run
            tok.max_image_side = ctx.cfg.model.vision.max_image_side
        return model, tok

    async def evaluate(self, ctx: RunContext, when: str) -> dict[str, HeldoutResult]:
        import copy

        from posttrain.rollout import make_engine

        assert ctx.splits is not None
        cfg = ctx.cfg
        if when == "before":
            eng = make_engine(cfg.engine.name, copy.deepcopy(ctx.model), ctx.tok, **cfg.engine.args)
        else:
            eng = ctx.state.engine
        res = await evaluate_conditions(eng, ctx.tok, ctx.splits.held_out, ctx.runner, cfg.eval.max_new_tokens,
                                        ctx.report, when)
        if when == "before":
            ctx.report("before", {"pass@1": res["image"].by_domain()})
        return res

    async def train(self, ctx: RunContext) -> None:
        from posttrain.models.vlm import save_vlm
        from posttrain.train.rl import train_rl

        assert ctx.splits is not None
        st = ctx.rl_state(tasks=ctx.splits.train)
        await train_rl(st, on_step=lambda s, row: ctx.report("rl", {"step": s + 1, "total": ctx.cfg.rl.steps, **row}))
        save_vlm(st.model, ctx.tok, ctx.run_dir / "final-model")

    def summarize(self, ctx: RunContext, before: dict, after: dict) -> dict:
        assert ctx.splits is not None
        summary = summarize(before, after)
        summary["questions"] = question_breakdown(ctx.splits.held_out, before["image"], after["image"])
        summary["cpu_s"] = time.process_time() - ctx.extra["c0"]  # all threads: wall time overstates a shared machine
        return summary

    def finish(self, ctx: RunContext, summary: dict) -> None:
        pass  # report.html (the pipeline's) holds the curves; the controls are in the summary


def format_summary(s: dict, run_dir: Path) -> list[str]:
    """The summary as a plain-text table: the RL gain and both controls, per domain."""
    g, b, a = s["rl_gain"], s["blank_control"], s["alt_text_control"]
    lines = [f"{'domain':<10}{'SFT':>8}{'+RL':>8}{'delta':>8}{'p':>10}{'blank':>8}{'alt-text SFT->RL':>18}"]
    for d, r in g["domains"].items():
        alt = a["domains"][d]
        lines.append(f"{d:<10}{r['from']:>8.3f}{r['to']:>8.3f}{r['to'] - r['from']:>+8.3f}{r['p_value']:>10.2g}"
                     f"{b['domains'][d]['from']:>8.3f}{alt['from']:>9.3f}->{alt['to']:.3f}")
    lines.append(f"{'mean':<10}{g['from']:>8.3f}{g['to']:>8.3f}{g['delta']:>+8.3f}{g['p_value']:>10.2g}"
                 f"{b['from']:>8.3f}{a['from']:>9.3f}->{a['to']:.3f}")
    lines.append(f"{g['n']} held-out tasks; RL flips fail->pass {g['fail_to_pass']}, pass->fail {g['pass_to_fail']}; "
                 f"image vs blank after RL p={b['p_value']:.2g}; alt-text RL gain p={a['p_value']:.2g}; "
                 f"wall {s['wall_s']:.0f}s; run directory {run_dir}")
    for key, q in s.get("questions", {}).items():
        flag = "  <- one answer for nearly all tasks: from the prior, not the image" if q["top_share_to"] >= 0.95 else ""
        lines.append(f"  {key:<18} n={q['n']:<4} {q['from']:.3f} -> {q['to']:.3f}; most common answer "
                     f"{q['top_answer_to']!r} on {q['top_share_to']:.0%} of tasks after RL{flag}")
    return lines
