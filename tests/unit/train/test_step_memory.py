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


class _CountingStatus:
    """A /proc/self/status stand-in that counts its reads and can show RSS above the high-water mark."""

    def __init__(self, hwm_kib: int, rss_kib: int):
        self.text, self.reads = f"Name:\tpython\nVmHWM:\t{hwm_kib} kB\nVmRSS:\t{rss_kib} kB\n", 0

    def read_text(self) -> str:
        self.reads += 1
        return self.text


def test_the_peak_and_the_resident_figure_come_from_one_read_of_status(monkeypatch):
    # two reads raced the process's other threads: RSS read second could exceed the peak read first (CI, stop 60)
    status = _CountingStatus(hwm_kib=2 * 2**20, rss_kib=2**20)
    monkeypatch.setattr(step_memory, "_STATUS", status)
    row = read_memory()
    assert status.reads == 1 and (row["mem/peak_gib"], row["mem/rss_gib"]) == (2.0, 1.0)


def test_the_peak_is_never_below_what_is_resident_now(monkeypatch):
    monkeypatch.setattr(step_memory, "_STATUS", _CountingStatus(hwm_kib=2**20, rss_kib=3 * 2**20))
    row = read_memory()  # the kernel folds current RSS into VmHWM lazily
    assert row["mem/peak_gib"] == row["mem/rss_gib"] == 3.0
