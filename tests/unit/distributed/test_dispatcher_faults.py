"""RaySandbox and RemoteEngine fault handling against fake actor handles (no cluster needed).

The handles return real concurrent futures / Ray exception objects, so the code under
test takes exactly the paths it takes against a live cluster.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf

import pytest

from posttrain.distributed.dispatcher import RaySandbox
from posttrain.distributed.faults import ClusterError, RemoteTimeout
from posttrain.distributed.routing import Slot
from posttrain.distributed.wire import to_wire
from posttrain.errors import SandboxError
from posttrain.types import ExecResult

ray = pytest.importorskip("ray")


class _Ref:
    def __init__(self, value=None, exc=None, never=False):
        self.f = cf.Future()
        if not never:
            self.f.set_exception(exc) if exc is not None else self.f.set_result(value)

    def future(self):
        return self.f


class _Method:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, *a):
        return self.fn(*a)


class _Pool:
    """A pool actor handle: 'ok' answers, 'dead' raises Ray's actor-died error, 'hung' never answers."""

    def __init__(self, mode):
        self.mode, self.calls = mode, 0

        def ex(*a):
            self.calls += 1
            if self.mode == "dead":
                return _Ref(exc=ray.exceptions.RayActorError())
            if self.mode == "hung":
                return _Ref(never=True)
            return _Ref(to_wire(ExecResult(status="ok", stdout="hi", files={"a": "b"})))

        self.exec = _Method(ex)

        def many(reqs):
            self.batches.append(len(reqs))
            if self.mode == "dead":
                return _Ref(exc=ray.exceptions.RayActorError())
            if self.mode == "hung":
                return _Ref(never=True)
            return _Ref([{"__error__": "SandboxError: bad image 'nope'", "sandbox": True} if r[4] == "nope"
                         else to_wire(ExecResult(status="ok", stdout="hi")) for r in reqs])

        self.batches: list[int] = []
        self.exec_many = _Method(many)
        self.open_session = _Method(lambda *a: _Ref(exc=ray.exceptions.RayActorError()) if self.mode == "dead"
                                    else _Ref("sid"))
        self.close_session = _Method(lambda *a: _Ref(None))
        self.session_call = _Method(lambda *a: _Ref(exc=ray.exceptions.RayActorError()))


def test_dead_node_work_is_resubmitted_elsewhere():
    dead, ok = _Pool("dead"), _Pool("ok")
    box = RaySandbox([Slot("pt_node_b", 8, dead), Slot("pt_node_a", 2, ok)])  # b looks freer: tried first
    res = asyncio.run(box.exec(["true"]))
    assert res.status == "ok" and res.stdout == "hi" and res.files["a"] == "b"
    assert dead.calls == 1 and ok.calls == 1 and box.resubmitted == 1
    assert not box.router.slots[0].alive and "RayActorError" in box.router.slots[0].why_dead


def test_no_capacity_left_is_a_clear_cluster_error():
    box = RaySandbox([Slot("pt_node_a", 1, _Pool("dead")), Slot("pt_node_b", 1, _Pool("dead"))])
    with pytest.raises(ClusterError, match="no sandbox capacity left.*pt_node_a.*pt_node_b"):
        asyncio.run(box.exec(["true"]))


def test_timeout_error_names_the_node():
    box = RaySandbox([Slot("pt_node_b", 1, _Pool("hung"))], call_timeout_s=0.05, max_resubmits=0)

    async def go():
        with pytest.raises(RemoteTimeout, match="node pt_node_b"):
            await box.call(box.router.slots[0], _Ref(never=True), 0.05, "exec")
        from posttrain.types import ExecLimits

        return await box.exec(["true"], limits=ExecLimits(wall_s=0.05))

    res = asyncio.run(go())
    assert res.status == "sandbox_error" and "pt_node_b" in res.error  # data, not a crash


def test_session_on_dead_node_raises_sandbox_error():
    box = RaySandbox([Slot("pt_node_b", 2, _Pool("ok"))])

    async def go():
        async with box.session("host") as s:
            with pytest.raises(SandboxError, match="pt_node_b"):
                await s.run("ls")  # the node died under the session: agent records infra_error

    asyncio.run(go())
    assert not box.router.slots[0].alive


def test_generation_split_balances_samples_and_keeps_order():
    from posttrain.distributed.remote_engine import _split
    from posttrain.rollout.engine import GenRequest, SamplingParams

    reqs = [GenRequest((1,), SamplingParams(n=n), id=str(i)) for i, n in enumerate([8, 1, 1, 1, 1, 4])]
    parts = _split(reqs, 2)
    assert [r.id for p in parts for r in p] == [str(i) for i in range(6)]
    assert [sum(r.params.n for r in p) for p in parts] == [8, 8]
    assert _split(reqs[:1], 3)[1:] == [[], []]


def test_executions_in_one_loop_turn_share_one_remote_call():
    pool = _Pool("ok")
    box = RaySandbox([Slot("pt_node_a", 4, pool, ahead=8)], exec_batch=32)

    async def go():
        return await asyncio.gather(*(box.exec(["true"]) for _ in range(12)))

    res = asyncio.run(go())
    assert [r.stdout for r in res] == ["hi"] * 12 and pool.batches == [12]


def test_batch_on_a_dead_node_is_resubmitted_elsewhere_one_by_one():
    dead, ok = _Pool("dead"), _Pool("ok")
    box = RaySandbox([Slot("pt_node_b", 8, dead), Slot("pt_node_a", 2, ok)], exec_batch=32)

    async def go():
        return await asyncio.gather(*(box.exec(["true"]) for _ in range(6)))

    res = asyncio.run(go())
    assert all(r.status == "ok" for r in res) and not box.router.slots[0].alive
    assert sum(ok.batches) == 6 and box.resubmitted == sum(dead.batches)


def test_a_refused_request_fails_alone_not_its_batch_mates():
    box = RaySandbox([Slot("pt_node_a", 4, _Pool("ok"))], exec_batch=32)

    async def go():
        return await asyncio.gather(box.exec(["true"]), box.exec(["true"], image="nope"), box.exec(["true"]),
                                    return_exceptions=True)

    a, bad, c = asyncio.run(go())
    assert a.stdout == c.stdout == "hi"
    assert isinstance(bad, SandboxError) and "nope" in str(bad)
