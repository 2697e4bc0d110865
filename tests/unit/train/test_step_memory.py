"""train/step_memory.py: each step's peak is that step's, not the run's."""

import sys

import pytest

from posttrain.train import step_memory
from posttrain.train.step_memory import StepMemory

GIB = 2**30
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux's")


@linux
def test_a_step_that_allocates_shows_its_peak():
    mem = StepMemory()
    mem.read()
    block = bytearray(512 * 2**20)  # touched: resident
    del block
    peak = mem.read()["mem/step_peak_gib"]
    assert peak * GIB >= 512 * 2**20


@linux
def test_the_next_steps_peak_starts_again():
    mem = StepMemory()
    block = bytearray(512 * 2**20)
    del block
    big = mem.read()
    small = mem.read()  # nothing allocated in between: back near RSS, well under the step that held 512 MiB
    assert small["mem/step_peak_gib"] < big["mem/step_peak_gib"] - 0.4
    assert "mem/peak_is_run" not in small


@linux
def test_rss_is_at_most_the_peak():
    row = StepMemory().read()
    assert 0 < row["mem/rss_gib"] <= row["mem/step_peak_gib"]


def test_without_a_reset_the_row_says_the_peak_is_the_runs(monkeypatch, tmp_path):
    monkeypatch.setattr(step_memory, "_CLEAR_REFS", tmp_path / "missing" / "clear_refs")  # the write fails
    row = StepMemory().read()
    assert row["mem/peak_is_run"] == 1.0 and row["mem/step_peak_gib"] > 0


def test_without_proc_the_peak_comes_from_getrusage(monkeypatch, tmp_path):
    monkeypatch.setattr(step_memory, "_STATUS", tmp_path / "no_status")
    monkeypatch.setattr(step_memory, "_CLEAR_REFS", tmp_path / "missing" / "clear_refs")
    row = StepMemory().read()
    assert row["mem/peak_is_run"] == 1.0 and "mem/rss_gib" not in row and row["mem/step_peak_gib"] > 0
