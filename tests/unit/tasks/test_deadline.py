"""tasks/deadline.py: a limit on generator work that may never end, that leaves other timers alone."""

import signal
import threading
import time

import pytest

from posttrain.tasks.deadline import Overrun, within


def test_work_that_never_ends_is_cut_at_the_limit():
    t0 = time.monotonic()
    with pytest.raises(Overrun, match="still running after 0.2 s"):
        with within(0.2):
            while True:
                pass
    assert time.monotonic() - t0 < 5


def test_work_within_the_limit_is_left_alone_and_no_alarm_follows():
    with within(0.5):
        x = sum(range(1000))
    time.sleep(0.7)  # a timer left running would raise Overrun here
    assert x == 499500


def test_a_timer_already_running_still_fires_with_its_own_handler():
    fired = []
    before = signal.signal(signal.SIGALRM, lambda s, f: fired.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.6)
        t0 = time.monotonic()
        with within(5.0):
            time.sleep(0.1)
        time.sleep(1.0)
        assert len(fired) == 1 and 0.4 < fired[0] - t0 < 1.0  # at its own time, not ours, not lost
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_off_the_main_thread_the_work_runs_unguarded():
    out = []

    def work():
        with within(0.05):
            time.sleep(0.2)
        out.append("done")

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert out == ["done"]


def test_an_item_that_never_finishes_is_made_from_the_next_seed(monkeypatch):
    """number_sequence at level 3, seed 1: item 12's squares grow without end (the hundred-domain run on
    seed 1 hung here); past the limit the domain makes item 12 from the next seed, as for a failed item."""
    pytest.importorskip("reasoning_gym")
    from posttrain.registry import build
    from posttrain.tasks import reasoning_gym as rg

    monkeypatch.setattr(rg, "ITEM_LIMIT_S", 1.0)
    tasks = build("rg-number_sequence", kind="domain").generate(16, 1, 3.0)
    seeds = [int(t.verifier.args["seed"]) for t in tasks]
    assert len(tasks) == 16 and seeds[12] == seeds[11] + 1 and seeds.count(seeds[0]) == 15
