"""Long-tail queues, on a virtual-time loop: exact, instant, no wall-clock flakiness."""

import asyncio

import pytest

from posttrain.schedule.duration import DurationPredictor
from posttrain.schedule.longtail import InfraError, Job, LongTailRunner
from posttrain.testing.simclock import run_virtual


def _trained_predictor() -> DurationPredictor:
    p = DurationPredictor(long_factor=4.0)
    for _ in range(10):
        p.update("quick", 10, 1.0)
    for _ in range(3):
        p.update("agent", 10, 50.0)
    return p


def _sleeper(durations: dict[str, float]):
    async def run(job: Job) -> str:
        await asyncio.sleep(durations[job.key])
        return job.key

    return run


def test_long_task_never_blocks_the_short_queue():
    durations = {"L0": 50.0, "L1": 50.0, **{f"s{i}": 1.0 for i in range(8)}}

    async def main():
        runner = LongTailRunner(_sleeper(durations), predictor=_trained_predictor(),
                                short_concurrency=2, long_concurrency=1)
        # Long jobs submitted first: in a single FIFO they would take the slots.
        for k in ("L0", "L1"):
            assert runner.submit(Job(k, "agent", 10)) == "long"
        for i in range(8):
            assert runner.submit(Job(f"s{i}", "quick", 10)) == "short"
        shorts = await runner.collect(8)
        rest = await runner.collect(2)
        return shorts, rest

    shorts, rest = run_virtual(main())
    assert {o.job.key for o in shorts} == {f"s{i}" for i in range(8)}
    assert max(o.latency_s for o in shorts) == pytest.approx(4.0)  # 8 jobs / 2 slots x 1 s
    assert max(o.wait_s for o in shorts) == pytest.approx(3.0)
    assert [o.latency_s for o in rest] == pytest.approx([50.0, 100.0])  # long lane budget 1


def test_single_fifo_baseline_does_block():
    durations = {"L0": 50.0, **{f"s{i}": 1.0 for i in range(4)}}

    async def main():
        runner = LongTailRunner(_sleeper(durations), short_concurrency=1, long_concurrency=0, route=False)
        runner.submit(Job("L0", "agent", 10))
        for i in range(4):
            runner.submit(Job(f"s{i}", "quick", 10))
        return await runner.collect(5)

    out = run_virtual(main())
    assert min(o.latency_s for o in out if o.job.key != "L0") == pytest.approx(51.0)


def test_mispredicted_long_task_hands_its_short_slot_back():
    durations = {"surprise": 100.0, **{f"s{i}": 1.0 for i in range(6)}}

    async def main():
        runner = LongTailRunner(_sleeper(durations), predictor=_trained_predictor(),
                                short_concurrency=1, long_concurrency=1)
        runner.submit(Job("surprise", "quick", 10))  # predicted short, runs 100 s
        for i in range(6):
            runner.submit(Job(f"s{i}", "quick", 10))
        return await runner.collect(7)

    out = {o.job.key: o for o in run_virtual(main())}
    assert out["surprise"].promoted and out["surprise"].lane == "long"
    # Threshold is 4 x median(1 s) = 4 s: the shorts start then, not after 100 s.
    assert max(out[f"s{i}"].latency_s for i in range(6)) == pytest.approx(10.0)


def test_carried_over_long_task_reports_staleness():
    durations = {"L": 50.0, **{f"s{i}": 1.0 for i in range(4)}}

    async def main():
        runner = LongTailRunner(_sleeper(durations), predictor=_trained_predictor(),
                                short_concurrency=2, long_concurrency=1, max_staleness=1)
        runner.submit(Job("L", "agent", 10), version=0)
        runner.submit(Job("s0", "quick", 10), version=0)
        runner.submit(Job("s1", "quick", 10), version=0)
        step0 = await runner.collect(2, version=0)  # the step boundary: L still running
        late = []
        for v in (1, 2, 3):
            runner.submit(Job(f"s{v + 1}", "quick", 10), version=v)
            late += await runner.collect(2, version=v, timeout=30.0)
        return step0, late

    step0, late = run_virtual(main())
    assert {o.job.key for o in step0} == {"s0", "s1"}
    long_out = next(o for o in late if o.job.key == "L")
    assert long_out.staleness == 2 and long_out.status == "stale"  # over max_staleness 1


def test_timeout_is_recorded_never_scored():
    async def run(job):
        await asyncio.sleep(1000)
        return 1.0

    async def main():
        runner = LongTailRunner(run, route=False, short_concurrency=1, long_concurrency=0)
        runner.submit(Job("hang", "quick", 10, timeout_s=5.0))
        return await runner.collect(1)

    (o,) = run_virtual(main())
    assert o.status == "timeout" and o.result is None and o.latency_s == pytest.approx(5.0)


def test_infra_errors_are_retried_up_to_the_cap():
    calls = {"flaky": 0, "down": 0}

    async def run(job):
        calls[job.key] += 1
        if job.key == "down" or calls[job.key] < 2:
            raise InfraError("sandbox pool unreachable")
        return "fine"

    async def main():
        runner = LongTailRunner(run, route=False, short_concurrency=2, long_concurrency=0, max_retries=2)
        runner.submit(Job("flaky", "q"))
        runner.submit(Job("down", "q"))
        return {o.job.key: o for o in await runner.collect(2)}

    out = run_virtual(main())
    assert out["flaky"].status == "ok" and out["flaky"].attempts == 2
    assert out["down"].status == "infra_error" and out["down"].attempts == 3 and calls["down"] == 3


def test_a_crashing_job_is_recorded_not_raised():
    async def run(job):
        raise KeyError("bad parse")

    async def main():
        runner = LongTailRunner(run, route=False, short_concurrency=1, long_concurrency=0)
        runner.submit(Job("x", "q"))
        return await runner.collect(1)

    (o,) = run_virtual(main())
    assert o.status == "error" and o.attempts == 1 and "KeyError" in o.error


def test_predictor_uses_domain_and_length_then_falls_back():
    p = DurationPredictor(min_history=2)
    assert p.predict("x", 5) == p.prior_s and not p.is_long("x", 5)
    for _ in range(3):
        p.update("code", 100, 2.0)
        p.update("code", 5000, 40.0)
        p.update("arith", 20, 0.5)
    assert p.predict("code", 100) == 2.0
    assert p.predict("code", 5000) == 40.0
    assert p.predict("arith", 9999) == 0.5  # no band history: the domain's
    assert p.predict("new", 10) == 2.0  # no domain history: the global median
    assert p.is_long("code", 5000) and not p.is_long("code", 100)
    clone = DurationPredictor(min_history=2)
    clone.load_state_dict(p.state_dict())
    assert clone.predict("code", 5000) == 40.0


def test_step_ends_when_a_mispredicted_job_is_promoted():
    durations = {"surprise": 100.0, "s0": 1.0, "s1": 1.0}

    async def main():
        runner = LongTailRunner(_sleeper(durations), predictor=_trained_predictor(),
                                short_concurrency=2, long_concurrency=1)
        for k in ("surprise", "s0", "s1"):
            runner.submit(Job(k, "quick", 10))
        outs = await runner.collect_step()
        now = asyncio.get_running_loop().time()
        await runner.close()
        return outs, now

    outs, now = run_virtual(main())
    assert {o.job.key for o in outs} == {"s0", "s1"}
    assert now == pytest.approx(4.0)  # promoted at 4 x median, not held until 100 s


def test_predicted_long_jobs_past_the_long_backlog_start_short():
    """long_backlog bounds the long lane: later predicted-long jobs start in the short lane (and are
    promoted if they run long) instead of queueing without end behind it."""
    durations = {f"L{i}": 50.0 for i in range(5)}

    async def main():
        runner = LongTailRunner(_sleeper(durations), predictor=_trained_predictor(), short_concurrency=4,
                                long_concurrency=1, long_backlog=2)
        lanes = [runner.submit(Job(f"L{i}", "agent", 10)) for i in range(5)]
        await runner.close()
        return lanes

    assert run_virtual(main()) == ["long", "long", "short", "short", "short"]


def test_without_a_long_backlog_every_predicted_long_job_queues_long():
    async def main():
        runner = LongTailRunner(_sleeper({f"L{i}": 50.0 for i in range(5)}), predictor=_trained_predictor(),
                                short_concurrency=4, long_concurrency=1)
        lanes = [runner.submit(Job(f"L{i}", "agent", 10)) for i in range(5)]
        await runner.close()
        return lanes

    assert run_virtual(main()) == ["long"] * 5

