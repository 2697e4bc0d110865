"""`chart`: bar, line and pie charts with known data, rendered with Pillow from a seed.

Questions (each a short prompt; the chart is the message's image attachment):
- `largest`  "largest bar?" / "largest slice?"  -> the series label (A, B, ...)
- `trend`    "trend?"                           -> up / down (/ flat from difficulty 2)
- `value`    "value of B?"                      -> the bar's value, within `tol`

Difficulty knob: 1.0 -> 3 bars labelled A.. left to right, a clear maximum, up/down
trends, no noise; each +1 adds a series, shuffles label order (so labels must be read),
adds pixel noise and the `value` and pie questions. `questions=[...]` pins the mix.
`metadata.alt_text` is a data-free caption (kind and labels, never values): the text a
screen reader would get, used by the alt-text control of the vision quickstart.

Limits: labels are drawn only when `size >= 48` (below that, order and colour carry them).
"""

from __future__ import annotations

import random
from typing import Any

from posttrain.registry import domain
from posttrain.tasks.images import image_task
from posttrain.types import Spec, Task

PALETTE = [(220, 50, 47), (38, 110, 210), (40, 160, 40), (230, 140, 0), (130, 60, 190), (20, 170, 170)]
LABELS = "ABCDEF"


def _font(size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.load_default(size=max(8, size // 8))


def _noise(draw: Any, rng: random.Random, size: int, amount: float) -> None:
    for _ in range(int(amount * size * size / 40)):
        x, y = rng.randrange(size), rng.randrange(size)
        g = rng.randrange(120, 230)
        draw.point((x, y), fill=(g, g, g))


def _values(rng: random.Random, n: int, margin: int) -> list[int]:
    """n values in 1..9 whose maximum beats the runner-up by >= margin."""
    while True:
        vals = [rng.randint(1, 9) for _ in range(n)]
        top = sorted(vals, reverse=True)
        if top[0] - top[1] >= margin:
            return vals


def render_bars(labels: list[str], vals: list[int], size: int, rng: random.Random, noise: float) -> Any:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (size, size), "white")
    d = ImageDraw.Draw(img)
    m, text_h = max(2, size // 16), (size // 6 if size >= 48 else 0)
    base, top = size - m - text_h, m
    d.line([(m, base), (size - m, base)], fill=(0, 0, 0))
    slot = (size - 2 * m) / len(vals)
    for i, (lab, v) in enumerate(zip(labels, vals)):
        x0, x1 = m + i * slot + slot * 0.15, m + (i + 1) * slot - slot * 0.15
        y = base - (base - top) * v / 9
        d.rectangle([x0, y, x1, base - 1], fill=PALETTE[LABELS.index(lab)])
        if text_h:
            d.text(((x0 + x1) / 2, base + 1), lab, fill=(0, 0, 0), font=_font(size), anchor="mt")
    _noise(d, rng, size, noise)
    return img


def render_line(vals: list[float], size: int, rng: random.Random, noise: float) -> Any:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (size, size), "white")
    d = ImageDraw.Draw(img)
    m = max(2, size // 16)
    d.line([(m, size - m), (size - m, size - m)], fill=(0, 0, 0))
    d.line([(m, m), (m, size - m)], fill=(0, 0, 0))
    step = (size - 3 * m) / (len(vals) - 1)
    pts = [(2 * m + i * step, size - 2 * m - (size - 4 * m) * (v - 1) / 8) for i, v in enumerate(vals)]
    d.line(pts, fill=PALETTE[1], width=max(1, size // 24))
    _noise(d, rng, size, noise)
    return img


def render_pie(labels: list[str], vals: list[int], size: int, rng: random.Random, noise: float) -> Any:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (size, size), "white")
    d = ImageDraw.Draw(img)
    m, total, start = max(2, size // 16), sum(vals), rng.uniform(0, 360)
    for lab, v in zip(labels, vals):
        end = start + 360 * v / total
        d.pieslice([m, m, size - m, size - m], start, end, fill=PALETTE[LABELS.index(lab)])
        start = end
    _noise(d, rng, size, noise)
    return img


def _trend(rng: random.Random, direction: str, n: int) -> list[float]:
    if direction == "flat":
        c = rng.uniform(3, 7)
        return [c + rng.uniform(-0.4, 0.4) for _ in range(n)]
    lo, hi = rng.uniform(1, 3.5), rng.uniform(6.5, 9)
    vals = [lo + (hi - lo) * i / (n - 1) + rng.uniform(-0.6, 0.6) for i in range(n)]
    return vals if direction == "up" else vals[::-1]


@domain("chart")
class Chart:
    name = "chart"

    def __init__(self, size: int = 64, questions: list[str] | None = None, max_new_tokens: int = 8) -> None:
        self.size, self.questions, self.max_new_tokens = size, questions, max_new_tokens

    def _questions(self, difficulty: float) -> list[str]:
        if self.questions:
            return list(self.questions)
        return ["largest", "trend"] + (["value", "pie"] if difficulty >= 1.5 else [])

    def _one(self, rng: random.Random, q: str, difficulty: float) -> tuple[Any, str, str, Spec, dict]:
        n = min(6, 2 + max(1, int(difficulty)))
        labels = list(LABELS[:n])
        if difficulty >= 2:
            rng.shuffle(labels)
        noise = max(0.0, difficulty - 1.0)
        if q == "trend":
            dirs = ["up", "down"] + (["flat"] if difficulty >= 2 else [])
            ans = rng.choice(dirs)
            img = render_line(_trend(rng, ans, 5), self.size, rng, noise)
            return img, "trend?", ans, Spec("visual_choice", {"answer": ans, "options": dirs}), {"alt_text": "line chart, 5 points"}
        vals = _values(rng, n, 2 if difficulty < 2 else 1)
        if q == "value":
            i = rng.randrange(n)
            tol = 1.0 if difficulty < 2 else 0.5
            img = render_bars(labels, vals, self.size, rng, noise)
            return (img, f"value of {labels[i]}?", str(vals[i]), Spec("visual_number", {"answer": vals[i], "tol": tol}),
                    {"alt_text": f"bar chart, bars {', '.join(labels)}", "values": vals})
        kind = "slice" if q == "pie" else "bar"
        img = (render_pie if q == "pie" else render_bars)(labels, vals, self.size, rng, noise)
        ans = labels[vals.index(max(vals))]
        alt = f"{'pie' if q == 'pie' else 'bar'} chart, {kind}s {', '.join(labels)}"
        return (img, f"largest {kind}?", ans, Spec("visual_choice", {"answer": ans, "options": sorted(labels)}),
                {"alt_text": alt, "values": vals})

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"chart:{seed}:{difficulty}:{self.size}")
        qs = self._questions(difficulty)
        tasks = []
        for i in range(n):
            q = qs[i % len(qs)]
            img, question, ans, spec, meta = self._one(rng, q, difficulty)
            tasks.append(image_task(self.name, f"chart-{seed}-{i}", img, question, spec, ans, difficulty,
                                    {"question": q, **meta}, self.max_new_tokens))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        return wrong_for(task, rng)


def wrong_for(task: Task, rng: random.Random) -> str:
    """A plausible wrong answer for any visual_* verifier spec (shared by the vision domains)."""
    a = task.verifier.args
    if task.verifier.name == "visual_choice":
        return rng.choice([o for o in a["options"] if o != a["answer"]])
    if task.verifier.name == "visual_number":
        return str(int(round(float(a["answer"]) + rng.choice([-1, 1]) * (float(a["tol"]) + 1.5))))
    x0, y0, x1, y1 = a["box"]
    return f"{int(x1) + 3},{int(y1) + 3}"
