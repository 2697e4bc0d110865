"""`xref`: questions from the R manuals' real cross-page references, and page-location questions.

Two kinds, both over pages extracted from the PDFs of Debian's r-doc-pdf (`rdocs.py`):
- `follow`: a page says "see Section 5.1 [Arrays], page 20". Follow it to the page
  printed 20 and give the first five words that follow the heading "Arrays" there.
- `locate`: "On which printed page does the section 'X' begin?" (from the PDF outline).

The prompt shows a few pages, each headed by its physical sheet number (`=== sheet 26 ===`),
which differs from the printed page number (R-intro's page 1 is sheet 7): the model has to
read the printed number off the page. The answer cites pages as `[p. 20]`; `page_cited`
checks the value, that exactly the evidence page is cited, and that the cited page's own
text holds the answer (citing every page shown, or copying a page, scores 0).
"""

from __future__ import annotations

import functools
import random
import re

from posttrain.registry import domain
from posttrain.tasks.documents.pdf import PdfDoc, load_pdf
from posttrain.tasks.documents.rdocs import r_manual
from posttrain.types import Limits, Message, Spec, Task

MANUALS = ("R-intro", "R-lang", "R-data", "R-admin", "R-ints", "R-exts")
REF = re.compile(r"\[([^\]\n]{3,60})\],\s*page\s+(\d+)")
_WORD = re.compile(r"\S+")


@functools.lru_cache(maxsize=8)
def manual(name: str) -> PdfDoc:
    return load_pdf(r_manual(name))


def _after_heading(text: str, title: str, n: int = 5) -> str | None:
    """The first `n` words after the line that ends with `title` (the section's heading)."""
    lines = text.split("\n")
    for i, ln in enumerate(lines):
        if ln.strip().endswith(title) and len(ln.strip()) <= len(title) + 12:
            after = _WORD.findall(" ".join(lines[i + 1 :]))
            words = [w for w in after if re.search(r"[A-Za-z0-9]", w)][:n]
            return " ".join(words) if len(words) == n else None
    return None


@functools.lru_cache(maxsize=1)
def items() -> tuple[tuple[str, str, int, int, str, str], ...]:
    """(kind, manual, source sheet, target sheet, title, expected), in a fixed order."""
    out = []
    for name in MANUALS:
        pdf = manual(name)
        for p in pdf.pages:
            for m in REF.finditer(p.text.replace("\n", " ")):
                title, label = m.group(1).strip(), m.group(2)
                t = pdf.by_label(label)
                if t is None or t == p.index:
                    continue
                first = _after_heading(pdf.pages[t].text, title)
                if first:
                    out.append(("follow", name, p.index, t, title, first))
        for h in pdf.outline:
            if h.title and h.title in pdf.pages[h.page].text and pdf.pages[h.page].label.isdigit():
                out.append(("locate", name, h.page, h.page, h.title, pdf.pages[h.page].label))
    return tuple(dict.fromkeys(out))


def _sheets(pdf: PdfDoc, shown: list[int]) -> str:
    return "\n\n".join(f"=== sheet {i + 1} ===\n{pdf.pages[i].text.strip()}" for i in shown)


@domain("xref")
class XRef:
    name = "xref"

    def __init__(self, distractors: int = 2, max_new_tokens: int = 64) -> None:
        self.distractors, self.max_new_tokens = distractors, max_new_tokens

    def _task(self, it: tuple, rng: random.Random, tid: str, difficulty: float) -> Task:
        kind, name, src, tgt, title, expected = it
        pdf = manual(name)
        pool = [i for i in range(len(pdf.pages)) if i not in (src, tgt) and pdf.pages[i].text.strip()]
        shown = sorted({src, tgt, *rng.sample(pool, self.distractors)})
        rng.shuffle(shown)
        label = pdf.pages[tgt].label
        if kind == "follow":
            q = (f"On sheet {src + 1} the manual refers to \"[{title}], page {label}\". Follow the reference to the page "
                 f"printed {label} and give the first five words of the text after the heading \"{title}\" there. "
                 f"Answer with those five words and cite the page as [p. {label}].")
        else:
            q = (f"On which printed page number does the section \"{title}\" begin? Answer with the printed page "
                 f"number (not the sheet number) and cite that page as [p. N].")
        prompt = f"Pages of the manual '{name}' (R {name}), extracted from the PDF:\n\n{_sheets(pdf, shown)}\n\n{q}"
        return Task(
            id=tid, domain=self.name, prompt=(Message("user", prompt),),
            verifier=Spec("page_cited", {"expected": expected, "evidence": [label], "pages": {label: pdf.pages[tgt].text},
                                         "kind": "phrase" if kind == "follow" else "label"}),
            difficulty=float(difficulty), limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=60.0),
            metadata={"kind": kind, "manual": name, "source_sheet": src + 1, "target_sheet": tgt + 1, "title": title,
                      "shown_labels": [pdf.pages[i].label for i in shown]},
            oracle=f"{expected} [p. {label}]",
        )

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"xref:{seed}")
        pool = list(items())
        follow = [x for x in pool if x[0] == "follow"]
        locate = [x for x in pool if x[0] == "locate"]
        rng.shuffle(follow)
        rng.shuffle(locate)
        picked = [x for pair in zip(follow, locate) for x in pair][:n]  # half follow, half locate
        return [self._task(it, rng, f"xref-{seed}-{i}", difficulty) for i, it in enumerate(picked)]

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        label = task.verifier.args["evidence"][0]
        others = [x for x in task.metadata["shown_labels"] if x != label]
        body = task.oracle.rsplit(" [p.", 1)[0]
        if task.metadata["kind"] == "locate":
            return f"{int(label) + rng.choice([-1, 1])} [p. {label}]"
        return f"{body} [p. {rng.choice(others)}]" if rng.random() < 0.5 else f"{' '.join(body.split()[1:])} [p. {label}]"
