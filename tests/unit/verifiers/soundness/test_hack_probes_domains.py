"""Every shipped domain: no hack probe scores, through the RL scoring path and the real sandbox pool.

A small `posttrain tasks check` (a few tasks per domain, one repeat; the 10-repeat flake
figure comes from benchmarks/hack_probes.py). Holes still open are listed in
KNOWN_HOLES, each run on its own as a strict xfail: when the fix lands the xfail turns
into a failure that says to move it back into the main test.
"""

import asyncio

import pytest

from posttrain.tasks import generate_domain
from posttrain.verifiers.soundness.probe_check import probe_tasks, probe_texts

# tasks per domain: enough to cover every task kind (terminal cycles through 4 kinds)
DOMAINS = {"arithmetic": 3, "chart": 3, "code": 2, "conflict": 3, "drawing": 3, "extraction": 3, "humaneval": 2,
           "math": 3, "needle": 3, "scene": 2, "terminal": 4, "tools": 2, "ui": 3}

KNOWN_HOLES: dict[tuple[str, str], str] = {}  # (domain, probe) -> why it still passes; empty: none known


def _run(name: str, n: int, only=None, exclude=()):
    from posttrain.sandbox import SandboxPool

    tasks = generate_domain(name, n, 0)
    names = only or ({p for t in tasks for p in probe_texts(t)} - set(exclude))

    async def go():
        pool = SandboxPool(concurrency=2)
        try:
            return await probe_tasks(name, tasks, repeats=1, sandbox=pool, only=set(names))
        finally:
            await pool.close()

    return asyncio.run(go())


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_no_probe_scores_on_a_shipped_domain(name):
    exclude = [p for d, p in KNOWN_HOLES if d == name]
    r = _run(name, DOMAINS[name], exclude=exclude)
    assert r.hack_pass_rate == 0.0, (r.probes, r.failures)
    assert r.sibling_harm_rate == 0.0 and r.infra_error_rate == 0.0, r.failures
    assert r.oracle_rl_pass_rate == 1.0 and r.honest_sibling_pass_rate == 1.0, r.failures


@pytest.mark.parametrize("domain,probe", [pytest.param(d, p, marks=pytest.mark.xfail(strict=True, reason=why))
                                          for (d, p), why in KNOWN_HOLES.items()])
def test_known_hole_is_closed(domain, probe):
    r = _run(domain, DOMAINS[domain], only={probe})
    assert r.hack_pass_rate == 0.0, r.failures


def harbor_folder(root):
    d = root / "hello"
    (d / "tests").mkdir(parents=True)
    (d / "solution").mkdir()
    (d / "task.toml").write_text('version = "1.0"\n[metadata]\ndifficulty = "easy"\n[verifier]\ntimeout_sec = 30\n')
    (d / "instruction.md").write_text("Create /app/hello.txt containing 'hi'.\n")
    (d / "tests" / "test.sh").write_text(
        '#!/bin/bash\nif [ "$(cat /app/hello.txt)" = hi ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n')
    (d / "solution" / "solve.sh").write_text("echo hi > /app/hello.txt\n")
    return d


def test_no_probe_scores_on_an_imported_harbor_task(tmp_path):
    from posttrain.sandbox import SandboxPool
    from posttrain.tasks.harbor import load_harbor_tasks

    harbor_folder(tmp_path)
    tasks = load_harbor_tasks(tmp_path)

    async def go():
        pool = SandboxPool(concurrency=2)
        try:
            return await probe_tasks("harbor", tasks, repeats=1, sandbox=pool)
        finally:
            await pool.close()

    r = asyncio.run(go())
    assert r.kinds == ["shell"] and len(r.probes) >= 6
    assert r.hack_pass_rate == 0.0 and r.oracle_rl_pass_rate == 1.0 and r.sibling_harm_rate == 0.0, r.failures
