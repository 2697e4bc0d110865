"""`ui`: screenshots of simple rendered dialogs (buttons, checkboxes, a text field).

Questions (the screenshot is the message's image attachment):
- `button`    "id of Delete?"   -> the control's id, b1..bN left to right
- `click`     "click Delete?"   -> "x,y" in image pixels, anywhere inside the button's box
- `checkbox`  "agree checked?"  -> yes / no
- `field`     "value of qty?"   -> the number typed in the field

Buttons follow one design system: OK green, Cancel grey, Delete red, Save blue, Help
yellow, each also labelled with its text (drawn when `size >= 48`). Difficulty knob:
1.0 -> 3 buttons, one checkbox, `button` and `checkbox` questions; 1.5 adds `click`;
2.0 adds a 4th button, a second checkbox (so its label must be read) and `field`.
`questions=[...]` pins the mix. Box coordinates are in the rendered image's pixels.
"""

from __future__ import annotations

import random
from typing import Any

from posttrain.registry import domain
from posttrain.tasks.chart import _font, _noise, wrong_for
from posttrain.tasks.images import image_task
from posttrain.types import Spec, Task

ROLES = {"OK": (40, 160, 40), "Cancel": (150, 150, 150), "Delete": (220, 40, 40), "Save": (40, 90, 220),
         "Help": (235, 200, 0)}
CHECKS = ["agree", "notify", "remember"]
FIELDS = ["qty", "age", "size"]


def render_dialog(buttons: list[str], checks: list[tuple[str, bool]], field: tuple[str, int] | None, size: int,
                  rng: random.Random, noise: float) -> tuple[Any, list[list[int]]]:
    """The dialog image and each button's box [x0, y0, x1, y1] in pixels."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (size, size), (245, 245, 245))
    d = ImageDraw.Draw(img)
    s, font = size / 32, _font(size)
    d.rectangle([0, 0, size - 1, int(4 * s)], fill=(60, 60, 80))  # title bar
    for k, (label, on) in enumerate(checks):
        y = int((7 + 6 * k) * s)
        box = [int(3 * s), y, int(7 * s), y + int(4 * s)]
        d.rectangle(box, outline=(0, 0, 0), fill=(20, 20, 20) if on else (255, 255, 255))
        if size >= 48:
            d.text((box[2] + 3, y), label, fill=(0, 0, 0), font=font)
    if field is not None:
        y = int(19 * s)
        d.rectangle([int(12 * s), y, int(29 * s), y + int(5 * s)], outline=(0, 0, 0), fill=(255, 255, 255))
        d.text((int(13 * s), y), str(field[1]), fill=(0, 0, 0), font=font)
        if size >= 48:
            d.text((int(2 * s), y), field[0], fill=(0, 0, 0), font=font)
    boxes, slot = [], (size - 4 * s) / len(buttons)
    for i, role in enumerate(buttons):
        b = [int(2 * s + i * slot + s), int(25 * s), int(2 * s + (i + 1) * slot - s), int(30 * s)]
        d.rectangle(b, fill=ROLES[role])
        if size >= 48:
            d.text(((b[0] + b[2]) / 2, (b[1] + b[3]) / 2), role[:4], fill=(255, 255, 255), font=font, anchor="mm")
        boxes.append(b)
    _noise(d, rng, size, noise)
    return img, boxes


@domain("ui")
class UI:
    name = "ui"

    def __init__(self, size: int = 64, questions: list[str] | None = None, max_new_tokens: int = 10) -> None:
        self.size, self.questions, self.max_new_tokens = size, questions, max_new_tokens

    def _questions(self, difficulty: float) -> list[str]:
        if self.questions:
            return list(self.questions)
        return ["button", "checkbox"] + (["click"] if difficulty >= 1.5 else []) + (["field"] if difficulty >= 2 else [])

    def _one(self, rng: random.Random, q: str, difficulty: float) -> tuple[Any, str, str, Spec, dict]:
        buttons = rng.sample(sorted(ROLES), 4 if difficulty >= 2 else 3)
        checks = [(c, rng.random() < 0.5) for c in rng.sample(CHECKS, 2 if difficulty >= 2 else 1)]
        field = (rng.choice(FIELDS), rng.randint(10, 99)) if difficulty >= 2 or q == "field" else None
        img, boxes = render_dialog(buttons, checks, field, self.size, rng, max(0.0, difficulty - 1.0))
        ids = [f"b{i + 1}" for i in range(len(buttons))]
        meta = {"buttons": dict(zip(ids, buttons)), "boxes": dict(zip(ids, boxes)), "checks": dict(checks)}
        if q in ("button", "click"):
            i = rng.randrange(len(buttons))
            if q == "button":
                return img, f"id of {buttons[i]}?", ids[i], Spec("visual_choice", {"answer": ids[i], "options": ids}), meta
            b = boxes[i]
            centre = f"{(b[0] + b[2]) // 2},{(b[1] + b[3]) // 2}"
            return img, f"click {buttons[i]}?", centre, Spec("point_in_box", {"box": b}), meta
        if q == "checkbox":
            label, on = rng.choice(checks)
            ans = "yes" if on else "no"
            return img, f"{label} checked?", ans, Spec("visual_choice", {"answer": ans, "options": ["yes", "no"]}), meta
        assert field is not None
        return (img, f"value of {field[0]}?", str(field[1]), Spec("visual_number", {"answer": field[1], "tol": 0}),
                {**meta, "field": list(field)})

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"ui:{seed}:{difficulty}:{self.size}")
        qs = self._questions(difficulty)
        tasks = []
        for i in range(n):
            q = qs[i % len(qs)]
            img, question, ans, spec, meta = self._one(rng, q, difficulty)
            tasks.append(image_task(self.name, f"ui-{seed}-{i}", img, question, spec, ans, difficulty,
                                    {"question": q, "alt_text": "dialog with buttons and checkboxes", **meta},
                                    self.max_new_tokens))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        return wrong_for(task, rng)
