"""`drawing`: simple engineering drawings (a plate with holes, two views, dimensions).

Questions (the drawing is the message's image attachment):
- `holes`      "holes?"         -> how many through-holes the plate has (1..4, up to 6)
- `view`       "hole in view?"  -> front / top: which of the two views shows the hole
- `dimension`  "width mm?"      -> the plate width from its dimension annotation

Drawings are to scale (1 px = 3 mm at size 32), so a dimension is readable from the
annotation text (drawn when `size >= 48`) or from the geometry. Difficulty knob: 1.0 ->
1-4 holes (positions and radii jittered), front view always on the left, `holes` and `view`; 1.5 adds `dimension`;
2.0 allows 1-6 holes, swaps the views at random (the F/T labels must be read) and adds
noise. `questions=[...]` pins the mix.
"""

from __future__ import annotations

import random
from typing import Any

from posttrain.registry import domain
from posttrain.tasks.chart import _font, _noise, wrong_for
from posttrain.tasks.images import image_task
from posttrain.types import Spec, Task

INK = (0, 0, 0)


def _canvas(size: int) -> tuple[Any, Any]:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (size, size), "white")
    return img, ImageDraw.Draw(img)


def render_holes(k: int, size: int, rng: random.Random, noise: float) -> Any:
    img, d = _canvas(size)
    s = size / 32
    d.rectangle([int(2 * s), int(6 * s), int(29 * s), int(25 * s)], outline=INK, width=max(1, int(s)))
    cells = [(cx, cy) for cy in (11, 20) for cx in (7, 13, 19, 25)]  # 8 cell centres, none touch
    for cx, cy in rng.sample(cells, k):
        cx, cy, r = cx + rng.uniform(-1, 1), cy + rng.uniform(-1, 1), rng.uniform(1.6, 2.4) * s  # jitter: no two alike
        d.ellipse([cx * s - r, cy * s - r, cx * s + r, cy * s + r], outline=INK, fill=(90, 90, 90))
    _noise(d, rng, size, noise)
    return img


def render_views(hole_in: str, front_left: bool, size: int, rng: random.Random, noise: float) -> Any:
    img, d = _canvas(size)
    s, font = size / 32, _font(size)
    for view, x0 in (("front", 2 if front_left else 17), ("top", 17 if front_left else 2)):
        box = [int(x0 * s), int(8 * s), int((x0 + 13) * s), int(24 * s)]
        d.rectangle(box, outline=INK, width=max(1, int(s)))
        if size >= 48:
            d.text(((box[0] + box[2]) / 2, int(3 * s)), view[0].upper(), fill=INK, font=font, anchor="mt")
        if view == hole_in:
            r = rng.uniform(2.0, 4.0) * s
            cx, cy = rng.uniform(box[0] + r + s, box[2] - r - s), rng.uniform(box[1] + r + s, box[3] - r - s)
            d.ellipse([cx - r, cy - r, cx + r, cy + r], outline=INK, fill=(90, 90, 90))
    _noise(d, rng, size, noise)
    return img


def render_dimension(width_mm: int, size: int, rng: random.Random, noise: float) -> Any:
    img, d = _canvas(size)
    s, font = size / 32, _font(size)
    w = width_mm / 3 * s  # to scale: 3 mm per pixel at size 32
    x0, x1 = (size - w) / 2, (size + w) / 2
    d.rectangle([x0, int(14 * s), x1, int(26 * s)], outline=INK, width=max(1, int(s)))
    y = int(10 * s)
    d.line([(x0, y), (x1, y)], fill=INK)
    for x in (x0, x1):
        d.line([(x, y - 2 * s), (x, int(14 * s))], fill=INK)
    if size >= 48:
        d.text((size / 2, y - 1), str(width_mm), fill=INK, font=font, anchor="mb")
    _noise(d, rng, size, noise)
    return img


@domain("drawing")
class Drawing:
    name = "drawing"

    def __init__(self, size: int = 64, questions: list[str] | None = None, max_new_tokens: int = 8) -> None:
        self.size, self.questions, self.max_new_tokens = size, questions, max_new_tokens

    def _questions(self, difficulty: float) -> list[str]:
        if self.questions:
            return list(self.questions)
        return ["holes", "view"] + (["dimension"] if difficulty >= 1.5 else [])

    def _one(self, rng: random.Random, q: str, difficulty: float) -> tuple[Any, str, str, Spec, dict]:
        noise = max(0.0, difficulty - 1.0)
        if q == "holes":
            top = 6 if difficulty >= 2 else 4
            k = rng.randint(1, top)
            opts = [str(i) for i in range(1, top + 1)]
            return (render_holes(k, self.size, rng, noise), "holes?", str(k),
                    Spec("visual_choice", {"answer": str(k), "options": opts}), {"alt_text": "plate with holes"})
        if q == "view":
            hole_in = rng.choice(["front", "top"])
            front_left = difficulty < 2 or rng.random() < 0.5
            return (render_views(hole_in, front_left, self.size, rng, noise), "hole in view?", hole_in,
                    Spec("visual_choice", {"answer": hole_in, "options": ["front", "top"]}),
                    {"alt_text": "two views, front and top", "front_left": front_left})
        width = rng.choice(range(20, 81, 10))
        return (render_dimension(width, self.size, rng, noise), "width mm?", str(width),
                Spec("visual_number", {"answer": width, "tol": 0}), {"alt_text": "plate with a width dimension"})

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"drawing:{seed}:{difficulty}:{self.size}")
        qs = self._questions(difficulty)
        tasks = []
        for i in range(n):
            q = qs[i % len(qs)]
            img, question, ans, spec, meta = self._one(rng, q, difficulty)
            tasks.append(image_task(self.name, f"drawing-{seed}-{i}", img, question, spec, ans, difficulty,
                                    {"question": q, **meta}, self.max_new_tokens))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        return wrong_for(task, rng)
