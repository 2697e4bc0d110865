"""The trajectory store's hand-written serialiser equals the generic `thaw` and round-trips."""

from __future__ import annotations

from posttrain.store.trajectories import TrajectoryStore, traj_from_dict, traj_to_dict
from posttrain.types import ExecLimits, ExecResult, FileChange, ToolCall, TrajError, Trajectory, Turn, VerifyResult, thaw


def rich() -> Trajectory:
    res = ExecResult(status="ok", stdout="hi", files={"a": "b"}, limits=ExecLimits(wall_s=2),
                     files_changed=(FileChange("a", "added"),))
    return Trajectory(
        "t-1", "v1", "terminal", (1, 2, 3),
        (Turn("assistant", "call", (4, 5), (-0.1, -0.2), True, ToolCall("bash", {"command": "ls"}), None, 0.01),
         Turn("tool", "obs", (6,), (), False, None, res, 0.02),
         Turn("assistant", "done", (7, 8), (-0.3, -0.4))),
        weights_version=3, reward=0.5, verify=VerifyResult(0.5, False, {"agent": {"steps": 2, "failed": [1, 2]}}),
        step=4, group=1, sample=2, finish_reason="answer", timings={"generate_s": 0.1}, error=TrajError("sandbox", "x"))


def test_serialiser_equals_generic_thaw():
    t = rich()
    assert traj_to_dict(t) == thaw(t)


def test_store_round_trips_a_trajectory(tmp_path):
    store = TrajectoryStore(tmp_path / "t.sqlite")
    store.put_many([rich()])
    assert list(store.iter()) == [traj_from_dict(thaw(rich()))] and list(store.iter())[0] == rich()


def test_background_writes_are_visible_after_flush_and_reads(tmp_path):
    import dataclasses

    store = TrajectoryStore(tmp_path / "t.sqlite", background=True)
    store.put_many([dataclasses.replace(rich(), sample=k) for k in range(50)])
    assert store.count() == 50  # a read waits for the queued write
    store.close()
    again = TrajectoryStore(tmp_path / "t.sqlite")
    assert again.count() == 50


def test_a_failed_background_write_is_raised_naming_the_store(tmp_path):
    import pytest

    from posttrain.store.trajectories import StoreError

    store = TrajectoryStore(tmp_path / "t.sqlite", background=True)
    store.put_many([object()])  # not a trajectory: the writer thread fails
    with pytest.raises(StoreError, match="t.sqlite"):
        store.flush()
    store.close()
