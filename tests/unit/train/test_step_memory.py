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


def test_release_free_heap_asks_glibc_to_trim_everything(monkeypatch):
    calls = []
    monkeypatch.setattr(step_memory, "_TRIM", lambda pad: calls.append(pad) or 1)
    assert step_memory.release_free_heap() is True and calls == [0]  # pad 0: keep nothing spare at the top


def test_release_free_heap_does_nothing_without_glibc(monkeypatch):
    monkeypatch.setattr(step_memory, "_TRIM", None)
    assert step_memory.release_free_heap() is False


@pytest.mark.skipif(step_memory._TRIM is None, reason="glibc's malloc_trim")
def test_freed_chunks_below_a_live_one_leave_the_resident_set():
    """The RL loop's case: freed activations under chunks still in use stay resident until trimmed."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    chunks = [libc.malloc(64 * 1024) for _ in range(2048)]  # 128 MiB below glibc's mmap threshold: in the heap
    assert all(chunks)
    for c in chunks:
        ctypes.memset(c, 1, 64 * 1024)  # touched: resident
    sentinel = libc.malloc(64 * 1024)  # live above them, so free() cannot give them back by shrinking the top
    for c in chunks:
        libc.free(c)
    held = read_memory()["mem/rss_gib"]
    step_memory.release_free_heap()
    freed = held - read_memory()["mem/rss_gib"]
    libc.free(sentinel)
    assert freed >= 0.06  # most of the 0.125 GiB
