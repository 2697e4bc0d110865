"""Every shipped domain: oracle 1.0, empty 0, wrong < 1, no flakes (a small `tasks check`)."""

import asyncio

import pytest

from posttrain.verifiers.soundness.check import check_domain

IN_PROCESS = ["arithmetic", "math", "extraction", "needle", "conflict", "tools", "scene"]


@pytest.mark.parametrize("name", IN_PROCESS)
@pytest.mark.parametrize("difficulty", [0.0, 2.0])
def test_in_process_domain_is_sound(name, difficulty):
    report = asyncio.run(check_domain(name, n=12, repeats=2, difficulty=difficulty))
    assert report.sound, report.as_json()


@pytest.mark.parametrize("name,n", [("humaneval", 10), ("code", 6), ("terminal", 4)])
def test_sandbox_domain_is_sound(name, n):
    report = asyncio.run(check_domain(name, n=n, repeats=2))
    assert report.sound, report.as_json()
