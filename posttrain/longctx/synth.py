"""Synthetic long documents with gold answers and gold spans, for tests and benchmarks.

    sd = make_document(seed=3, n_chars=50_000, style="markdown")
    sd.doc[q.start:q.end]          # the gold span (a sentence or a table row) of q in sd.qa

A document is a set of invented entities (pronounceable nonsense names, so nothing is
known in advance), one section per entity, filler prose, and facts "<attribute> of
<entity> is <value>" in several phrasings or as table rows. Distractors are built in:
every attribute is stated for many entities, every entity has several attributes, and
entities are mentioned in passing in other sections. About a third of the questions
name the attribute by a paraphrase ("entry code" for "access code"). An unanswerable
question asks for an attribute the document never states for that entity (but states
for others).

Styles: "markdown" (# headings), "numbered" (1.2 Title), "pages" (form feeds and page
markers, no headings), "plain" (paragraphs only).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

STYLES = ("markdown", "numbered", "pages", "plain")
ATTRIBUTES = (
    "access code", "batch number", "launch year", "serial number", "room number", "annual budget",
    "reactor temperature", "altitude", "license number", "crew size", "warehouse capacity", "radio frequency",
    "founding year", "ticket price", "vault combination", "shipment weight", "tower height", "archive shelf",
)
_FILLER = (
    "analysis report system network process review quarter budget policy team market field signal "
    "river harbor engine module sensor archive ledger record survey project station council village "
    "protocol routine pattern measure window corridor schedule delivery supply demand forecast weather "
    "bridge canal orchard granary library museum theatre garden mountain valley island coast forest "
    "inspection maintenance transport logistics training audit inventory storage meeting summary notice"
).split()
_VERBS = "reviewed noted described improved delayed expanded measured discussed approved inspected recorded compared".split()
_ADJ = "quiet steady routine minor major regional northern eastern careful early late formal broad narrow".split()
_SYL = "ka lo mi ra ven tor sil dar quen bri mo zu fel gan hor ith nal pe rus tav ul wex yor zan".split()
# Paraphrases a question may use instead of the document's wording (about 1 in 3 does).
PARAPHRASES = {
    "access code": "entry code", "launch year": "year of launch", "annual budget": "yearly budget",
    "crew size": "number of crew", "tower height": "height of the tower", "ticket price": "price of a ticket",
    "founding year": "year it was founded", "altitude": "elevation", "room number": "room assigned",
    "shipment weight": "weight of the shipment", "warehouse capacity": "storage capacity of the warehouse",
}
_PHRASES = (
    "The {a} of {e} is {v}.",
    "{e}'s {a} is recorded as {v}.",
    "For {e}, the {a} was set to {v}.",
    "Records confirm that the {a} of {e} is {v}.",
)


@dataclass(frozen=True)
class QA:
    question: str
    answer: str | None  # None: the document does not answer it
    start: int  # gold span offsets (-1 when unanswerable)
    end: int
    entity: str
    attribute: str


@dataclass(frozen=True)
class SynthDoc:
    doc: str
    seed: int
    style: str
    qa: tuple[QA, ...]


def entity_name(rng: random.Random) -> str:
    return "".join(rng.choice(_SYL) for _ in range(rng.randint(2, 3))).capitalize()


def filler_sentence(rng: random.Random, names: list[str] | None = None) -> str:
    w = lambda: rng.choice(_FILLER)  # noqa: E731
    s = f"The {rng.choice(_ADJ)} {w()} {w()} was {rng.choice(_VERBS)} by the {w()} {w()}"
    if names and rng.random() < 0.15:
        s += f" near {rng.choice(names)}"
    return s + f" during the {rng.choice(_ADJ)} {w()}."


def value(rng: random.Random) -> str:
    return str(rng.randrange(1000, 999_999)) if rng.random() < 0.7 else f"{rng.choice('ABCDEFGHKMPRTX')}{rng.choice('ABCDEFGHKMPRTX')}-{rng.randrange(100, 9999)}"


class _Writer:
    """Appends text and remembers the offsets of the facts it writes."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.n = 0
        self.spans: dict[tuple[str, str], tuple[int, int, str]] = {}

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.n += len(text)

    def fact(self, text: str, key: tuple[str, str], v: str) -> None:
        self.spans[key] = (self.n, self.n + len(text), v)
        self.add(text)


def _section(w: _Writer, rng: random.Random, ent: str, facts: dict[str, str], names: list[str], target: int) -> None:
    items = list(facts.items())
    table = len(items) >= 3 and rng.random() < 0.3
    paras = max(2, target // 360)
    slots = sorted(rng.randrange(paras) for _ in items)
    for p in range(paras):
        sents = [filler_sentence(rng, names) for _ in range(rng.randint(2, 5))]
        w.add(" ".join(sents[: len(sents) // 2]) + " ")
        for (a, v), slot in zip(items, slots):
            if slot == p and not table:
                w.fact(rng.choice(_PHRASES).format(a=a, e=ent, v=v), (ent, a), v)
                w.add(" ")
        w.add(" ".join(sents[len(sents) // 2 :]) + "\n\n")
    if table:
        w.add("| Unit | Attribute | Value |\n|---|---|---|\n")
        for a, v in items:
            w.fact(f"| {ent} | {a} | {v} |", (ent, a), v)
            w.add("\n")
        w.add("\n")


def make_document(seed: int, n_chars: int, style: str = "markdown", n_questions: int = 7, unanswerable: int = 1) -> SynthDoc:
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; known: {', '.join(STYLES)}")
    rng = random.Random(seed)
    n_ent = max(4, n_chars // 1800)
    names = list(dict.fromkeys(entity_name(rng) for _ in range(n_ent * 2)))[:n_ent]
    facts = {e: {a: value(rng) for a in rng.sample(ATTRIBUTES, rng.randint(2, 5))} for e in names}
    w = _Writer()
    per = n_chars // len(names)
    w.add({"markdown": "# Field register\n\n", "numbered": "1 Field register\n\n"}.get(style, ""))
    for i, e in enumerate(names):
        if style == "markdown":
            w.add(f"## {e} site\n\n")
        elif style == "numbered":
            w.add(f"1.{i + 1} {e} site\n\n")
        elif style == "pages" and i and rng.random() < 0.5:
            w.add(f"\f" if rng.random() < 0.5 else f"Page {i + 1}\n\n")
        _section(w, rng, e, facts[e], names, per)
    doc = "".join(w.parts)
    qa: list[QA] = []
    for e, a in rng.sample([k for k in w.spans], min(n_questions, len(w.spans))):
        s, t, v = w.spans[(e, a)]
        assert doc[s:t].count(v) >= 1
        asked = PARAPHRASES[a] if a in PARAPHRASES and rng.random() < 0.33 else a
        qa.append(QA(f"What is the {asked} of {e}?", v, s, t, e, a))
    for _ in range(unanswerable):
        e = rng.choice(names)
        missing = [a for a in ATTRIBUTES if a not in facts[e]]
        a = rng.choice(missing)
        qa.append(QA(f"What is the {a} of {e}?", None, -1, -1, e, a))
    return SynthDoc(doc, seed, style, tuple(qa))


def make_corpus(seed: int, n_docs: int, min_chars: int = 20_000, max_chars: int = 200_000) -> list[SynthDoc]:
    """Documents with log-uniform lengths in [min_chars, max_chars], styles in rotation."""
    rng = random.Random(seed)
    out = []
    for i in range(n_docs):
        n = int(min_chars * (max_chars / min_chars) ** rng.random())
        doc_seed, style = rng.randrange(2**31), STYLES[i % len(STYLES)]
        sd = make_document(doc_seed, n, style)
        while len(sd.doc) < min_chars:  # filler length is random: grow the target until it fits
            n = int(n * 1.2)
            sd = make_document(doc_seed, n, style)
        out.append(sd)
    return out
