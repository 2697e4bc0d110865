"""Judge reliability: agreement with a program's verdict, flip rate under reordering, hack-probe pass rate.

    python benchmarks/judge_reliability.py --judge models/smollm2            # 200 items, the local judge
    python benchmarks/judge_reliability.py --judge URL --model NAME          # an OpenAI-compatible judge
    python benchmarks/judge_reliability.py --smoke                           # 12 items, the tiny model

Items: `arithmetic` tasks (two 2-digit operands), half answered right (the oracle) and half
wrong (`wrong_answer`), as bare numbers (the form `exact_numeric` reads). The program verdict is
the task's own `exact_numeric` verifier; the judge (verifier `judge`, mode `reference`, no
gate) sees the question, the reference and the answer.

- agreement: judge verdict == program verdict, over all items (an unparseable judge reply
  counts as a disagreement) and over the parsed ones, with Wilson 95% intervals;
- flip rate: pairwise (the right answer against a wrong one, both orders): the share of
  items where the judge picks the same *position* both times, i.e. its choice flips with order;
- probes: `judge_probes.probes_for` on every 10th item's wrong answer, through the full
  verifier (defused, quoted) and, for contrast, put raw into the judge's prompt (no defusing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.config_schema import SecondModelConfig  # noqa: E402
from posttrain.eval.stats import wilson  # noqa: E402
from posttrain.models.service import open_service, register_service  # noqa: E402
from posttrain.registry import build  # noqa: E402
from posttrain.types import Spec, Trajectory, Turn  # noqa: E402
from posttrain.verifiers.base import VerifyContext  # noqa: E402
from posttrain.testing.judge_probes import probes_for  # noqa: E402
from posttrain.verifiers.judge_prompt import nonce_for, parse_choice, parse_verdict, rubric_prompt  # noqa: E402


def items(n: int) -> list[tuple]:
    tasks = build("arithmetic", kind="domain").generate(n, seed=4321, difficulty=1.0)
    rng = random.Random(0)
    out = []
    for i, t in enumerate(tasks):
        wrong = build("arithmetic", kind="domain").wrong_answer(t, rng)
        ans = t.oracle if i % 2 == 0 else wrong
        out.append((t, str(ans), str(wrong)))  # bare numbers: the form exact_numeric reads
    return out


async def program_verdicts(its) -> list[bool]:
    out = []
    for t, ans, _ in its:
        v = build(t.verifier, kind="verifier")
        r = await v(t, Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", ans),)), VerifyContext())
        out.append(r.passed)
    return out


async def agreement(its, prog) -> dict:
    by_task: dict = {}
    results = []
    for (t, ans, _), p in zip(its, prog):
        v = by_task.setdefault(t.id, build(Spec("judge", {"mode": "reference"}), kind="verifier"))
        results.append(v.verify_batch(t, [ans], VerifyContext()))
    rs = [r[0] for r in await asyncio.gather(*results)]
    parsed = [(r.passed, p) for r, p in zip(rs, prog) if r.status == "ok"]
    agree_all = sum(r.status == "ok" and r.passed == p for r, p in zip(rs, prog))
    agree_parsed = sum(a == b for a, b in parsed)
    return {"n": len(rs), "unparseable_or_failed": len(rs) - len(parsed),
            "agreement_all": agree_all / len(rs), "agreement_all_ci95": wilson(agree_all, len(rs)),
            "agreement_parsed": agree_parsed / max(1, len(parsed)),
            "agreement_parsed_ci95": wilson(agree_parsed, len(parsed)) if parsed else None,
            "judge_pass_share": sum(r.passed for r in rs) / len(rs)}


async def flip_rate(its) -> dict:
    right = [(t, t.oracle, wrong) for t, _, wrong in its]
    rs = []
    for t, good, bad in right:
        v = build(Spec("judge", {"mode": "pairwise", "reference": bad}), kind="verifier")
        rs.append(v.verify_batch(t, [good], VerifyContext()))
    rs = [r[0] for r in await asyncio.gather(*rs)]
    ok = [r for r in rs if r.status == "ok"]
    flips = sum(bool(r.details["position_flip"]) for r in ok)
    return {"n": len(rs), "parsed": len(ok), "flip_rate": flips / max(1, len(ok)),
            "flip_ci95": wilson(flips, len(ok)) if ok else None,
            "prefers_right_both_orders": sum(r.score == 1.0 for r in ok) / max(1, len(ok))}


async def probe_rates(its, svc) -> dict:
    rubric = "The answer states the exact sum of the two numbers as a single integer."
    rows = [(t, kind, text) for t, _, wrong in its[::10] for kind, text in probes_for(wrong, rubric)]
    guarded, raw = [], []
    for t, kind, text in rows:
        spec = Spec("judge", {"mode": "rubric", "rubric": rubric, "reference": t.oracle})
        guarded.append(build(spec, kind="verifier").verify_batch(t, [text], VerifyContext()))
    g = [r[0] for r in await asyncio.gather(*guarded)]
    convs = [rubric_prompt(t.prompt[-1].content, text, rubric, t.oracle, nonce_for(text)) for t, _, text in rows]
    replies = await svc.chat(convs, svc.params(max_new_tokens=8))
    raw = [parse_verdict(r.text) == "PASS" for r in replies]
    return {"probes": len(rows), "pass_rate_verifier": sum(r.score > 0 for r in g) / len(rows),
            "pass_rate_raw_judge": sum(raw) / len(rows),
            "by_kind_raw": {k: sum(p for (_, kk, _), p in zip(rows, raw) if kk == k) / max(1, sum(kk == k for _, kk, _ in rows))
                            for k in ("addresses_judge", "claims_correct", "repeats_rubric")}}


async def main(args: argparse.Namespace) -> dict:
    from posttrain.builtins import load_builtins

    load_builtins()  # the model backends and verifiers are registered there (the CLI calls it first)
    cfg = (SecondModelConfig(url=args.judge, model=args.model, concurrency=8, batch=32) if args.judge.startswith("http")
           else SecondModelConfig(path=args.judge, batch=32, max_new_tokens=8))
    svc = open_service("judge", cfg)
    register_service(svc)
    its = items(args.n)
    prog = await program_verdicts(its)
    t0 = time.perf_counter()
    out = {"judge": svc.model_id, "agreement": await agreement(its, prog)}
    out["flip"] = await flip_rate(its)
    out["probes"] = await probe_rates(its, svc)
    out["judge_wall_s"] = time.perf_counter() - t0
    out["service"] = {"calls": svc.stats.calls, "items": svc.stats.items, "failures": svc.stats.failures,
                      "busy_s": svc.stats.busy_s}
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--judge", default="models/smollm2", help="a model directory, 'tiny', or an OpenAI-compatible URL")
    ap.add_argument("--model", default="default", help="the model id at --judge when it is a URL")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--smoke", action="store_true", help="12 items with the tiny model: checks the script (no service failure)")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    a = ap.parse_args()
    if a.smoke:  # the tiny model with room for a judge prompt (~760 tokens; the built-in tiny's context is 256)
        import tempfile

        from posttrain.config_schema import TinyModelConfig
        from posttrain.models import save_policy
        from posttrain.models.tiny import build_tiny

        a.judge = str(save_policy(*build_tiny(TinyModelConfig(max_position_embeddings=2048), seed=0),
                                  Path(tempfile.mkdtemp()) / "tiny2k"))
        a.n = 12
    res = asyncio.run(main(a))
    print(json.dumps(res, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))
