"""Vision domains: seeded, sound (oracle 1, empty 0, wrong < 1, no flakes), image bytes in the version."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from posttrain.registry import build
from posttrain.verifiers.soundness.check import check_tasks
from posttrain.tasks.images import image_bytes, task_images

from .conftest import make_tasks

DOMAINS = ["chart", "ui", "drawing"]


@pytest.mark.parametrize("name", DOMAINS)
@pytest.mark.parametrize("difficulty", [1.0, 2.5])
def test_domain_is_sound(name, difficulty):
    dom = build(name, kind="domain")
    tasks = dom.generate(30, 0, difficulty)
    report = asyncio.run(check_tasks(name, dom, tasks, repeats=2))
    assert report.sound, report.failures


@pytest.mark.parametrize("name", DOMAINS)
def test_same_seed_same_versions(name):
    a, b = make_tasks(name, seed=3), make_tasks(name, seed=3)
    assert [t.version for t in a] == [t.version for t in b]
    assert [t.version for t in make_tasks(name, seed=4)] != [t.version for t in a]


@pytest.mark.parametrize("name", DOMAINS)
def test_every_prompt_carries_one_png(name):
    for t in make_tasks(name):
        (att,) = task_images(t)
        assert image_bytes(att)[:8] == b"\x89PNG\r\n\x1a\n"


def test_image_bytes_are_in_the_version():
    t = make_tasks("chart", n=1)[0]
    m = t.prompt[0]
    other = dataclasses.replace(m.attachments[0], sha256="0" * 64)
    t2 = dataclasses.replace(t, prompt=(dataclasses.replace(m, attachments=(other,)),))
    assert t2.version != t.version


def test_difficulty_adds_question_kinds():
    easy = {t.metadata["question"] for t in make_tasks("chart", n=20, difficulty=1.0)}
    hard = {t.metadata["question"] for t in make_tasks("chart", n=20, difficulty=2.0)}
    assert easy == {"largest", "trend"} and hard == {"largest", "trend", "value", "pie"}


def test_prompt_text_does_not_hold_the_answer():
    for name in DOMAINS:
        for t in make_tasks(name, n=12):
            assert t.oracle not in t.prompt[0].content.split()
