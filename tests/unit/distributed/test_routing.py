"""Global admission and least-loaded routing (routing.py), without Ray."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from posttrain.distributed.routing import NoCapacity, Router, Slot


def test_pick_prefers_most_free_capacity():
    r = Router([Slot("a", 4, inflight=3), Slot("b", 4, inflight=1), Slot("c", 8, inflight=6)])
    assert r.pick().name == "b"  # free: a=1, b=3, c=2


def test_load_spreads_in_proportion_to_capacity():
    async def go():
        r = Router([Slot("big", 6), Slot("small", 2)])
        got = [(await r.admit()).name for _ in range(8)]
        return got, r

    got, r = asyncio.run(go())
    assert got.count("big") == 6 and got.count("small") == 2
    assert r.pick() is None  # both full


def test_admission_waits_for_a_release_then_routes_there():
    async def go():
        r = Router([Slot("a", 1), Slot("b", 1)])
        a, b = await r.admit(), await r.admit()
        waiter = asyncio.create_task(r.admit())
        await asyncio.sleep(0.05)
        assert not waiter.done() and r.waiting == 1  # global admission: queued on the driver
        r.release(b, 0.01)
        return (await asyncio.wait_for(waiter, 2)).name

    assert asyncio.run(go()) == "b"


def test_dead_pool_gets_no_work_and_last_death_fails_waiters():
    async def go():
        r = Router([Slot("a", 1), Slot("b", 1)])
        r.mark_dead(r.slots[1], "raylet killed")
        s = await r.admit()
        assert s.name == "a"
        waiter = asyncio.create_task(r.admit())
        await asyncio.sleep(0.05)
        r.mark_dead(s, "node lost")
        with pytest.raises(NoCapacity, match="b: raylet killed"):
            await asyncio.wait_for(waiter, 2)

    asyncio.run(go())


def test_queue_timeout_is_bounded():
    async def go():
        r = Router([Slot("a", 1)], queue_timeout_s=0.1)
        await r.admit()
        with pytest.raises(asyncio.TimeoutError):
            await r.admit()

    asyncio.run(go())


def test_metrics_name_every_node():
    r = Router([Slot("pt_node_a", 2), Slot("pt_node_b", 2)])
    r.slots[1].failures = 3
    m = r.metrics()
    assert m["cluster/sandbox/pt_node_b/failures"] == 3 and m["cluster/sandbox/pools_alive"] == 2
    assert "cluster/sandbox/pt_node_a/exec_per_s" in m and m["cluster/sandbox/queue_depth"] == 0


def test_no_cluster_imports_no_ray():
    code = ("import sys, posttrain.distributed, posttrain.train.rl, posttrain.recipes.quickstart, posttrain.cli.main;"
            "from posttrain.builtins import load_builtins; load_builtins();"  # as the CLI does: load_config checks names
            "from posttrain.config import load_config; import posttrain.distributed as d;"
            "assert not d.enabled(load_config(None)); assert 'ray' not in sys.modules, 'ray imported'")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-500:]


def test_waiters_are_granted_in_arrival_order():
    async def go():
        r = Router([Slot("a", 1)])
        held = await r.admit()
        order = []

        async def wait(i):
            slot = await r.admit()
            order.append(i)
            r.release(slot)

        tasks = [asyncio.create_task(wait(i)) for i in range(5)]
        await asyncio.sleep(0.01)
        r.release(held)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(go()) == [0, 1, 2, 3, 4]


def test_one_burst_of_releases_frees_every_waiter_in_one_loop_turn():
    async def go():
        r = Router([Slot("a", 4)])
        held = [await r.admit() for _ in range(4)]
        waiters = [asyncio.create_task(r.admit()) for _ in range(4)]
        await asyncio.sleep(0.01)
        for s in held:
            r.release(s)
        turns = 0
        while not any(w.done() for w in waiters):
            await asyncio.sleep(0)
            turns += 1
        return [w.done() for w in waiters], turns

    done, turns = asyncio.run(go())
    assert done == [True] * 4 and turns < 10  # all in the same turn, not one lock hand-off each


def test_ahead_admits_beyond_capacity_and_no_further():
    r = Router([Slot("a", 2, ahead=4)])

    async def go():
        return [await r.admit() for _ in range(6)]

    assert len(asyncio.run(go())) == 6 and r.pick() is None


def test_waiter_that_times_out_takes_no_slot():
    async def go():
        r = Router([Slot("a", 1)], queue_timeout_s=0.05)
        held = await r.admit()
        with pytest.raises(asyncio.TimeoutError, match="queued"):
            await r.admit()
        r.release(held)
        return r.slots[0].inflight, r.waiting

    assert asyncio.run(go()) == (0, 0)
