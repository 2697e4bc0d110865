"""The trained tiny model on needle questions at 4x its context: pipeline vs truncated full text.

    .venv/bin/python benchmarks/longctx_trained.py [--ctx 512 --sft-steps 600 --rl-steps 100 --seed 0]

1. Build the tiny default model with a `--ctx`-token window (character tokenizer: one
   token per character), save it with `save_pretrained`, load it back.
2. Training data, as `posttrain longctx make-data` builds it (posttrain/longctx/data.py):
   - needle tasks short enough that the whole prompt fits the window (the task format:
     haystack + "Question: ... Answer with the number only.");
   - reader rows for the pipeline's answer step: the chunk holding the needle ->
     "<value> [cN]", another chunk -> "not found" (ModelReader's exact prompt).
   SFT on both, then the real RL loop (`posttrain.train.rl.train_rl`) on the short needle
   tasks.
3. Held-out needle documents of 4 x ctx characters (depths 0, 0.25, 0.5, 0.75, 1), answered
   two ways by the same trained model, greedy:
   - truncated: the task prompt with the document cut to what fits the window;
   - pipeline: `LongDoc` (chunk, index, rank, read the top chunks one at a time, verify),
     with `ModelReader` as the reader.
   Correct = the answer's number equals the needle's value. Paired exact McNemar.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rows_to_seqs(tok, rows):
    """Chat rows (messages ending with the assistant's answer) -> the SFT loop's sequences."""
    from posttrain.train.sft import demo_sequences
    from posttrain.types import Message

    msgs = [[Message(m["role"], m["content"]) for m in r["messages"]] for r in rows]
    return demo_sequences(tok, [(m[:-1], m[-1].content) for m in msgs])


def truncated_prompt(task, tok, ctx: int, max_new: int):
    """The task prompt with its document cut at the end until the whole prompt fits `ctx`."""
    from posttrain.rollout.prompting import encode_prompt
    from posttrain.types import Message

    doc, q = task.prompt[0].content.split("\n\nQuestion: ")
    lo, hi = 0, len(doc)
    while lo < hi:  # the longest document prefix that fits
        mid = (lo + hi + 1) // 2
        ids = encode_prompt(tok, [Message("user", f"{doc[:mid]}\n\nQuestion: {q}")])
        lo, hi = (mid, hi) if len(ids) + max_new <= ctx else (lo, mid - 1)
    return encode_prompt(tok, [Message("user", f"{doc[:lo]}\n\nQuestion: {q}")]), lo


def main() -> None:
    from posttrain.builtins import load_builtins

    load_builtins()  # as the CLI does first: load_config checks every registry name it reads
    p = argparse.ArgumentParser()
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-short", type=int, default=12000, help="short needle tasks (fit the window): SFT + RL")
    p.add_argument("--n-reader", type=int, default=1500, help="long needle docs whose chunks make reader rows")
    p.add_argument("--n-eval", type=int, default=100)
    p.add_argument("--sft-steps", type=int, default=600)
    p.add_argument("--sft-lr", type=float, default=2e-3)
    p.add_argument("--rl-steps", type=int, default=100)
    p.add_argument("--rl-lr", type=float, default=1e-4)
    p.add_argument("--top-k", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="runs/longctx_trained")
    args = p.parse_args()

    from posttrain.config import load_config
    from posttrain.eval.stats import mcnemar_exact
    from posttrain.longctx.data import needle_tasks, reader_rows, task_rows
    from posttrain.longctx.model_reader import ModelReader
    from posttrain.longctx.pipeline import LongDoc
    from posttrain.models import load_policy, save_policy
    from posttrain.models.tiny import build_tiny
    from posttrain.rollout import make_engine
    from posttrain.rollout.engine import GenRequest, SamplingParams
    from posttrain.train.rl import build_state, train_rl
    from posttrain.train.sft import train_sequences
    from posttrain.verifiers.numeric import parse_number

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cfg = load_config(None, [f"model.tiny.max_position_embeddings={args.ctx}", f"seed={args.seed}",
                             f"rl.lr={args.rl_lr}", "rl.checkpoint_every=0", "rl.max_new_tokens=12",
                             f"rl.steps={args.rl_steps}",
                             "engine.name=fast"])
    save_policy(*build_tiny(cfg.model.tiny, seed=args.seed), out / "base-model")
    model, tok = load_policy(out / "base-model")
    eng = make_engine("fast", model, tok)
    reader = ModelReader(eng, tok, context_tokens=args.ctx)
    budget = reader.chunk_budget("What is the secret number of Xxxxxxxx Yyyyyyyy?")
    # Short tasks fill the window from a quarter to all of it (haystack chars; the needle
    # sentence, question and template take the rest), so the truncated baseline reads the
    # same prompt shapes it was trained on; many distinct tasks, so values cannot be memorised.
    short_len = args.ctx - 145
    long_len = 4 * args.ctx
    short = needle_tasks(args.n_short, args.seed, lengths=(short_len // 4, short_len // 2, 3 * short_len // 4, short_len))
    long_train = needle_tasks(args.n_reader, args.seed + 1, lengths=(long_len,))
    held = needle_tasks(args.n_eval, 10_000 + args.seed, lengths=(long_len,))
    rows = task_rows(short) + reader_rows(long_train, tok, budget, negatives=1, seed=args.seed)
    seqs = [s for s in rows_to_seqs(tok, rows) if len(s[0]) + len(s[1][0][0]) <= args.ctx]
    print(f"ctx {args.ctx}, chunk budget {budget} tokens, short haystacks {short_len // 4}-{short_len} chars, "
          f"held-out docs {long_len} chars; SFT rows {len(seqs)} of {len(rows)}", flush=True)

    from posttrain.config import OptimConfig

    optim = OptimConfig(lr=args.sft_lr, warmup=20, schedule="cosine")
    train_sequences(model, tok.pad_token_id, seqs, args.sft_steps, optim, 32, args.seed,
                    on_step=lambda step, loss: (step + 1) % 100 or print(f"SFT step {step + 1}: loss {loss:.3f}",
                                                                        flush=True))
    t_sft = time.perf_counter() - t0

    st = build_state(cfg, out, model, tok, short, [], sandbox=None)

    def on_step(step: int, row: dict) -> None:
        if (step + 1) % 20 == 0:
            print(f"RL step {step + 1}: reward {row['reward/mean']:.3f}", flush=True)

    asyncio.run(train_rl(st, on_step=on_step))
    t_train = time.perf_counter() - t0
    save_policy(st.model, tok, out / "model")

    eng = st.engine
    reader = ModelReader(eng, tok, context_tokens=args.ctx)
    results = []
    for t in held:
        gold = int(t.oracle)
        ids, kept = truncated_prompt(t, tok, args.ctx, 12)
        o = eng.generate([GenRequest(ids, SamplingParams(temperature=0.0, max_new_tokens=12))])[0]
        trunc_ok = parse_number(o.text) == gold
        ld = LongDoc(t.prompt[0].content.split("\n\nQuestion: ")[0], reader, tok, max_tokens=budget)
        res = ld.ask(t.metadata["question"], top_k=args.top_k)
        pipe_ok = res.found and parse_number(res.answer) == gold
        results.append({"id": t.id, "depth": t.metadata["depth"], "gold_start": t.metadata["gold_start"],
                        "kept_chars": kept, "truncated": trunc_ok, "pipeline": pipe_ok,
                        "truncated_text": o.text, "pipeline_answer": res.answer, "read_tokens": res.cost.read_tokens,
                        "doc_tokens": res.cost.doc_tokens})
    b = sum(r["truncated"] and not r["pipeline"] for r in results)
    c = sum(r["pipeline"] and not r["truncated"] for r in results)
    n = len(results)
    acc = {k: sum(r[k] for r in results) / n for k in ("truncated", "pipeline")}
    print(f"\nheld-out needle questions: {n}, documents of {long_len} characters = {long_len / args.ctx:.0f}x the "
          f"{args.ctx}-token window")
    print("| depth | n | truncated full text | pipeline |")
    print("|---|---|---|---|")
    for d in sorted({r["depth"] for r in results}):
        rs = [r for r in results if r["depth"] == d]
        print(f"| {d} | {len(rs)} | {sum(r['truncated'] for r in rs) / len(rs):.2f} | "
              f"{sum(r['pipeline'] for r in rs) / len(rs):.2f} |")
    print(f"| all | {n} | **{acc['truncated']:.3f}** | **{acc['pipeline']:.3f}** |")
    in_window = [r for r in results if r["gold_start"] < r["kept_chars"]]
    print(f"needle inside the truncated window: {len(in_window)}/{n}; truncated accuracy on those "
          f"{sum(r['truncated'] for r in in_window) / max(1, len(in_window)):.3f}")
    print(f"McNemar exact p = {mcnemar_exact(b, c):.2g} (pipeline only {c}, truncated only {b}); "
          f"pipeline reads {sum(r['read_tokens'] for r in results) / sum(r['doc_tokens'] for r in results):.1%} "
          f"of the document tokens")
    print(f"wall: SFT {t_sft:.0f}s, SFT+RL {t_train:.0f}s, total {time.perf_counter() - t0:.0f}s")
    (out / "results.json").write_text(json.dumps({"args": vars(args), "accuracy": acc, "b": b, "c": c,
                                                  "p": mcnemar_exact(b, c), "rows": results}, indent=1))


if __name__ == "__main__":
    main()
