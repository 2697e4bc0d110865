"""train/step_memory.py: each step's resident memory and the run's peak, without disturbing the process's own."""

import resource
import sys

import pytest

from posttrain.train import step_memory
from posttrain.train.step_memory import step_memory as read_memory

GIB = 2**30
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmRSS and VmHWM are Linux's")


@linux
def test_resident_memory_rises_by_what_the_step_holds():
    before = read_memory()["mem/rss_gib"]
    block = bytearray(512 * 2**20)  # touched: resident
    after = read_memory()["mem/rss_gib"]
    del block
    assert after - before >= 0.45


@linux
def test_the_peak_remembers_memory_already_freed():
    block = bytearray(512 * 2**20)
    held = read_memory()["mem/rss_gib"]
    del block
    row = read_memory()
    # the kernel batches its RSS counters: two reads may differ by a few hundred KiB
    assert row["mem/peak_gib"] >= held - 0.01 and held > row["mem/rss_gib"] + 0.4


@linux
def test_reading_leaves_the_process_high_water_mark_as_it_was():  # what /usr/bin/time -v and getrusage report
    block = bytearray(512 * 2**20)
    del block
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(3):
        read_memory()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >= before


def test_without_proc_the_peak_comes_from_getrusage(monkeypatch, tmp_path):
    monkeypatch.setattr(step_memory, "_STATUS", tmp_path / "no_status")
    row = read_memory()
    assert row["mem/peak_gib"] > 0 and "mem/rss_gib" not in row
