"""Long-context training data: needle and conflict tasks, reader SFT rows.

    tasks = needle_tasks(n=100, seed=0, lengths=(1024, 4096), depths=(0, .25, .5, .75, 1))
    rows = reader_rows(tasks, chunk_tokens=120)    # SFT rows in ModelReader's prompt format

Needle (RULER-style): filler prose with `n_needles` facts "The secret number of <name>
is <n>." for different names (multi-key) plus `distractors` near-miss facts, the asked
needle at depth d (0 = first sentence, 1 = last); the verifier is `exact_numeric`.
Conflict: several dated, ranked sources disagree on one value; the prompt states the
rule (most recent wins, or best source rank wins); the target is `<value> [D#]`,
scored by `cited_answer`. Every generator is seeded and records its knobs in metadata.
"""

from __future__ import annotations

import random
from typing import Any, Iterable, Sequence

from posttrain.longctx.chunk import split_by_structure
from posttrain.longctx.model_reader import SYSTEM
from posttrain.longctx.rank import render_context
from posttrain.longctx.synth import entity_name, filler_sentence
from posttrain.longctx.tokens import TokenizerLike
from posttrain.types import Limits, Message, Spec, Task

NEEDLE = "The secret number of {e} is {v}."


def _haystack(rng: random.Random, length: int) -> list[str]:
    sents: list[str] = []
    n = 0
    while n < length:
        s = filler_sentence(rng)
        sents.append(s)
        n += len(s) + 1
    return sents


def needle_doc(rng: random.Random, length: int, depth: float, n_needles: int = 1, distractors: int = 0) -> dict[str, Any]:
    """A haystack of ~`length` chars; the asked needle at `depth`; others anywhere."""
    names = list(dict.fromkeys(entity_name(rng) for _ in range(4 * (n_needles + distractors) + 4)))
    asked, others = names[0], names[1 : n_needles + distractors]
    sents = _haystack(rng, length)
    value = str(rng.randrange(1000, 99_999))
    inserts = [(min(len(sents), round(depth * len(sents))), NEEDLE.format(e=asked, v=value))]
    for o in others:
        inserts.append((rng.randrange(len(sents) + 1), NEEDLE.format(e=o, v=rng.randrange(1000, 99_999))))
    for pos, text in sorted(inserts, key=lambda x: -x[0]):  # from the back: earlier positions stay valid
        sents.insert(pos, text)
    doc, start = "", -1
    for i, s in enumerate(sents):
        sep = "\n\n" if i and i % 5 == 0 else (" " if i else "")
        if s == inserts[0][1]:
            start = len(doc) + len(sep)
        doc += sep + s
    return {"doc": doc, "entity": asked, "answer": value, "start": start, "end": start + len(inserts[0][1])}


def needle_tasks(n: int, seed: int, lengths: Sequence[int] = (1024,), depths: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
                 n_needles: int = 1, distractors: int = 0) -> list[Task]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length, depth = lengths[i % len(lengths)], depths[(i // len(lengths)) % len(depths)]
        nd = needle_doc(rng, length, depth, n_needles, distractors)
        q = f"What is the secret number of {nd['entity']}?"
        out.append(Task(
            id=f"needle-{seed}-{i:05d}", domain="needle",
            prompt=(Message("user", f"{nd['doc']}\n\nQuestion: {q} Answer with the number only."),),
            verifier=Spec("exact_numeric", {"answer": int(nd["answer"])}),
            difficulty=min(1.0, length / max(lengths)) * (0.5 + 0.1 * (n_needles + distractors)),
            limits=Limits(max_new_tokens=12),
            metadata={"question": q, "length": len(nd["doc"]), "depth": depth, "needles": n_needles,
                      "distractors": distractors, "gold_start": nd["start"], "gold_end": nd["end"], "seed": seed},
            oracle=nd["answer"],
        ))
    return out


RULES = {
    "recent": "When sources disagree, the most recent date wins.",
    "rank": "When sources disagree, the source with the best rank (1 is best) wins.",
}


def conflict_tasks(n: int, seed: int, n_sources: int = 3) -> list[Task]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ent, attr = entity_name(rng), rng.choice(["capacity", "budget", "height", "crew size", "founding year"])
        rule = rng.choice(sorted(RULES))
        values = rng.sample(range(100, 9999), n_sources)
        dates = [f"20{rng.randrange(10, 25)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}" for _ in range(n_sources)]
        ranks = rng.sample(range(1, n_sources + 1), n_sources)
        if len(set(dates)) < n_sources:
            dates = [f"20{10 + k}-0{1 + k % 9}-1{k % 9}" for k in rng.sample(range(n_sources), n_sources)]
        win = max(range(n_sources), key=lambda k: dates[k]) if rule == "recent" else min(range(n_sources), key=lambda k: ranks[k])
        docs = []
        for k in range(n_sources):
            body = f"{filler_sentence(rng)} The {attr} of {ent} is {values[k]}. {filler_sentence(rng)}"
            docs.append(f"[D{k + 1}] date {dates[k]}, source rank {ranks[k]}\n{body}")
        q = f"What is the {attr} of {ent}?"
        prompt = "\n\n".join(docs) + f"\n\nRule: {RULES[rule]}\nQuestion: {q} Answer as: <value> [D#]"
        out.append(Task(
            id=f"conflict-{seed}-{i:05d}", domain="conflict", prompt=(Message("user", prompt),),
            verifier=Spec("cited_answer", {"answer": str(values[win]), "cite": f"D{win + 1}",
                                           "others": [str(v) for k, v in enumerate(values) if k != win]}),
            difficulty=min(1.0, n_sources / 6), limits=Limits(max_new_tokens=16),
            metadata={"rule": rule, "winner": f"D{win + 1}", "question": q, "sources": n_sources, "seed": seed},
            oracle=f"{values[win]} [D{win + 1}]",
        ))
    return out


def task_rows(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    """Full-prompt SFT rows: the task's messages plus its oracle answer."""
    return [{"messages": [{"role": m.role, "content": m.content} for m in t.prompt] + [{"role": "assistant", "content": t.oracle}],
             "task_id": t.id, "domain": t.domain} for t in tasks if t.oracle is not None]


def reader_rows(tasks: Iterable[Task], tokenizer: TokenizerLike, chunk_tokens: int, negatives: int = 1, seed: int = 0) -> list[dict[str, Any]]:
    """SFT rows for the pipeline's answer step on needle tasks: the gold chunk -> "<value> [cN]",
    `negatives` other chunks -> "not found". Same prompt as ModelReader sends."""
    rng = random.Random(seed)
    rows = []
    for t in tasks:
        md = t.metadata
        doc = t.prompt[0].content.split("\n\nQuestion: ")[0]
        chunks = split_by_structure(doc, chunk_tokens, tokenizer)
        gold = [c for c in chunks if c.start <= md["gold_start"] and md["gold_end"] <= c.end]
        others = [c for c in chunks if c not in gold]
        picks = [(c, f"{t.oracle} [{c.id}]") for c in gold] + [(c, "not found") for c in rng.sample(others, min(negatives, len(others)))]
        for c, target in picks:
            msgs = [Message("system", SYSTEM), Message("user", f"{render_context([c])}\nQuestion: {md['question']}")]
            rows.append({"messages": [{"role": m.role, "content": m.content} for m in msgs] + [{"role": "assistant", "content": target}],
                         "task_id": t.id, "domain": "needle-reader"})
    return rows
