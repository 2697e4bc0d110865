"""The small version of the 100-domain `tasks check` (the full one: benchmarks/rg_domains.py).

For every shipped rg-* domain, two level-1 tasks through the RL scoring path (`VerifierRunner`): the
oracle scores 1, the empty and the wrong answer 0, no hack probe and no candidate pair scores 1."""

from __future__ import annotations

import asyncio
import random

import pytest

from posttrain.tasks import reasoning_gym as rg

pytest.importorskip("reasoning_gym")

N = 2  # tasks per domain for oracle / empty / wrong and the pairs; the probes run on the first


def _check(name: str) -> tuple:
    from posttrain.registry import build
    from posttrain.verifiers.soundness.check import check_tasks, score_once
    from posttrain.testing.pair_probes import pair_answers
    from posttrain.verifiers.soundness.probe_check import probe_tasks

    dom = build(name, kind="domain")
    tasks = dom.generate(N, 0, 1.0)

    async def go():
        report = await check_tasks(name, dom, tasks, 1, None, 4, 0)
        probes = await probe_tasks(name, tasks[:1], 1, None, 0, 4, None)
        pairs = []
        for t in tasks:
            for text in pair_answers(t.oracle or "", dom.wrong_answer(t, random.Random(f"0:{t.id}"))):
                r = await score_once(t, text, None)
                pairs.append((r.score, text[:60]))
        return report, probes, pairs

    return asyncio.run(go())


@pytest.mark.parametrize("name", [rg.PREFIX + g for g in rg.shipped()])
def test_every_shipped_domain_is_sound_on_the_rl_path(name):
    report, probes, pairs = _check(name)
    assert report.sound, report.failures
    assert probes.hack_pass_rate == 0.0 and probes.oracle_rl_pass_rate == 1.0, probes.failures
    assert all(score < 1.0 for score, _ in pairs), [text for score, text in pairs if score >= 1.0]


M = 6  # level-1 tasks per domain for the constant-answer probe


@pytest.mark.parametrize("name", [rg.PREFIX + g for g in rg.shipped()])
def test_no_one_answer_passes_every_task_of_a_shipped_domain(name):
    """A policy that answers one string to every task must not be paid in full: each task's reference
    answer, tried on all M tasks, fails at least one unless all M share it. Found puzzle24 (any 24 from
    four numbers, wrapped) and propositional_logic (any weakening, excluded)."""
    from posttrain.registry import build
    from posttrain.verifiers.rg_answer import norm
    from posttrain.verifiers.soundness.check import score_once

    tasks = build(name, kind="domain").generate(M, 0, 1.0)

    async def passes(text: str) -> int:
        return sum([(await score_once(t, text, None)).score >= 1.0 for t in tasks])

    for oracle in sorted({t.oracle for t in tasks if t.oracle}):
        if all(norm(t.oracle or "") == norm(oracle) for t in tasks):
            continue  # every task's answer: a constant is right here, not a hole
        assert asyncio.run(passes(oracle)) < len(tasks), f"{oracle!r} passes all {len(tasks)} tasks of {name}"
