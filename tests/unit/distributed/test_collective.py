"""The weight-broadcast pieces (collective.py) without a cluster: layout, a real gloo group, config errors."""

from __future__ import annotations

import multiprocessing as mp

import pytest
import torch

from posttrain.distributed.collective import (broadcast_buffers, empty_buffers, flatten, free_port, make_group,
                                              unflatten)


def test_flatten_then_unflatten_restores_every_tensor_across_dtypes():
    state = {"a": torch.randn(3, 4), "b": torch.arange(5, dtype=torch.int64), "c": torch.randn(2, dtype=torch.float64),
             "d": torch.randn(7)}
    layout, bufs = flatten(state)
    assert len(bufs) == 3  # one flat buffer per dtype
    back = unflatten(layout, bufs)
    assert list(back) == list(state) and all(torch.equal(back[k], state[k]) for k in state)


def _receiver(port: int, layout, q) -> None:
    pg = make_group("127.0.0.1", port, 1, 2, "gloo", 20)
    bufs = empty_buffers(layout)
    broadcast_buffers(pg, bufs)
    # plain lists: a tensor sent through a Queue shares its storage by fd, which needs this
    # process alive until the parent has read it, and this process is about to exit
    q.put({k: v.tolist() for k, v in unflatten(layout, bufs).items()})


def test_gloo_group_broadcasts_a_state_to_another_process():
    state = {"w": torch.randn(16, 8), "b": torch.randn(8)}
    layout, bufs = flatten(state)
    port = free_port("127.0.0.1")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_receiver, args=(port, layout, q))
    p.start()
    try:
        pg = make_group("127.0.0.1", port, 0, 2, "gloo", 20)
        broadcast_buffers(pg, bufs)
        got = q.get(timeout=60)
    finally:
        p.join(30)
    assert all(torch.equal(torch.tensor(got[k]), state[k]) for k in state)


def test_collective_with_staleness_is_a_config_error_naming_both_keys():
    from posttrain.config import load_config
    from posttrain.distributed import build_remote_engine
    from posttrain.errors import ConfigError

    cfg = load_config(None, ["cluster.address=auto", "cluster.weight_sync=collective", "cluster.staleness=1"])
    with pytest.raises(ConfigError, match="weight_sync=collective.*staleness"):
        build_remote_engine(cfg, None, None)


def test_unknown_weight_sync_is_a_config_error_at_load():
    from posttrain.config import load_config
    from posttrain.errors import ConfigError

    with pytest.raises(ConfigError, match="'cluster.weight_sync'.*carrier-pigeon.*'object_store' or 'collective'"):
        load_config(None, ["cluster.address=auto", "cluster.weight_sync=carrier-pigeon"])
