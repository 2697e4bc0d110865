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
