"""Reader pass@1 on the document suites: the pipeline's top-5 chunks against truncation.

    .venv/bin/python benchmarks/documents_bench.py --skip-ingest --xref 0 --reports 0 --cite 0 \\
        --reader models/smollm2 --reader-tasks 30

For each built-in suite (xref, table_extract, niah) and each task, the document part of the
prompt (everything before its last line, which is the question) is given to the reader in
two ways, greedy decoding, scored by the suite's own verifier:
- truncation: the document's first tokens, as many as fit the model's context with the
  question and the answer budget;
- pipeline: the document chunked by structure (~400 tokens a chunk), ranked for the question
  (text + summary BM25, extractive summaries), the top 5 in document order.
Both arms answer the same tasks; pass@1 is reported with Wilson 95% intervals and the
discordant pairs (b: only the pipeline right, c: only truncation right) for McNemar.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from posttrain.eval.stats import mcnemar_exact, wilson  # the project's own: clamped to [0, 1]

SUITES = ("xref", "table_extract", "niah")
CHUNK_TOKENS = 400


def _score(task, text: str) -> float:
    from posttrain.types import Trajectory, Turn
    from posttrain.verifiers.run import VerifierRunner

    traj = Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", text),) if text else (), sample=0, finish_reason="stop")
    return asyncio.run(VerifierRunner(None).verify_all({task.id: task}, [traj]))[0].verify.score


def _contexts(doc: str, question: str, tok, budget: int) -> tuple[str, str]:
    """(truncated document, pipeline top-5 chunks) for one question, both within `budget` tokens."""
    from posttrain.longctx import LongDoc, OracleReader
    from posttrain.longctx.rank import merge, rank

    ids = tok.encode(doc, add_special_tokens=False)
    truncated = tok.decode(ids[:budget])
    ld = LongDoc(doc, OracleReader({}), tok, max_tokens=min(CHUNK_TOKENS, budget))
    idx, *_ = ld.index()
    picked, used = [], 0
    for c in merge(rank(idx, question, 5)):
        if used + c.n_tokens <= budget:
            picked.append(c.text)
            used += c.n_tokens
    return truncated, "\n\n".join(picked)


def reader_pass_at_1(model_dir: Path, n: int, seed: int, engine: str = "hf", max_new_cap: int = 512,
                     suites: tuple[str, ...] = SUITES, context: int | None = None, batch: int = 1) -> None:
    """`context`: read at most this many tokens (default: the model's window); a smaller one makes a quick smoke.
    `batch`: prompts generated together (the `fast` engine decodes a batch in one pass)."""
    from posttrain.eval.suite import load_suite
    from posttrain.models.io import load_policy
    from posttrain.rollout import make_engine
    from posttrain.rollout.engine import GenRequest, SamplingParams
    from posttrain.rollout.prompting import encode_prompt
    from posttrain.types import Message

    model, tok = load_policy(model_dir)
    eng = make_engine(engine, model, tok)
    ctx = context or int(getattr(model.config, "max_position_embeddings", 2048))
    print(f"reader {model_dir} ({engine}), context {ctx} tokens, {n} tasks a suite, greedy, answers capped at {max_new_cap} tokens")
    print("| suite | tasks | truncation pass@1 [95% CI] | pipeline pass@1 [95% CI] | b (only pipeline) | c (only truncation) | McNemar p |")
    print("|---|---|---|---|---|---|---|")
    for name in suites:
        suite = load_suite(name)
        tasks = list(suite.tasks)[:n]
        max_new = min(int(suite.sampling.get("max_new_tokens", 256)), max_new_cap)
        wins: dict[str, list[bool]] = {"trunc": [], "pipe": []}
        reqs, keys = [], []
        for t in tasks:
            content = t.prompt[-1].content
            doc, question = content.rsplit("\n", 1) if "\n" in content else ("", content)
            overhead = len(encode_prompt(tok, [Message("user", question)])) + max_new + 16
            truncated, piped = _contexts(doc, question, tok, max(64, ctx - overhead))
            for arm, text in (("trunc", truncated), ("pipe", piped)):
                ids = encode_prompt(tok, [Message("user", text + "\n" + question)])
                reqs.append(GenRequest(tuple(ids), SamplingParams(temperature=0.0, max_new_tokens=max_new)))
                keys.append((t, arm))
        outs = []
        for i in range(0, len(reqs), batch):  # the same greedy requests; a batch only shares the decode passes
            outs += eng.generate(reqs[i:i + batch])
        for (t, arm), out in zip(keys, outs):
            wins[arm].append(_score(t, out.text) == 1.0)
        k_t, k_p = sum(wins["trunc"]), sum(wins["pipe"])
        b = sum(p and not q for p, q in zip(wins["pipe"], wins["trunc"]))
        c = sum(q and not p for p, q in zip(wins["pipe"], wins["trunc"]))
        lt, ht = wilson(k_t, len(tasks))
        lp, hp = wilson(k_p, len(tasks))
        print(f"| {name} | {len(tasks)} | {k_t / len(tasks):.3f} [{lt:.2f}, {ht:.2f}] | {k_p / len(tasks):.3f} [{lp:.2f}, {hp:.2f}] "
              f"| {b} | {c} | {mcnemar_exact(b, c):.3f} |", flush=True)
