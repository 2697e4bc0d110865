"""build_state hands the run's schedule section to its Scheduler: the curriculum (lost once in a
merge, when the RL loop was rewritten) and the fixed order's file reach it, not only the policy."""

import copy

import pytest
import torch

from posttrain.config import load_config

BASE = ["seed=0", "rl.steps=2", "rl.prompts_per_step=2", "rl.group_size=2", "rl.max_new_tokens=4",
        "rl.checkpoint_every=0", "log.trackers=[]", "log.detect_every=0",
        "tasks.domains={arithmetic: {n_train: 10, n_eval: 2}}", "model.tiny.hidden_size=32",
        "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2"]


def _state(tmp_path, *overrides):
    from posttrain.models.tiny import build_tiny
    from posttrain.tasks.splits import make_splits
    from posttrain.train.rl import build_state

    torch.set_num_threads(1)
    cfg = load_config(None, [*BASE, *overrides])
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    train = make_splits(cfg).train
    (tmp_path / "run").mkdir()
    return build_state(cfg, tmp_path / "run", copy.deepcopy(model), tok, train, train[:2], None), train


def test_the_curriculum_reaches_the_scheduler(tmp_path):
    st, _ = _state(tmp_path, 'tasks.domains={"rg-gcd": {n_train: 10, n_eval: 2}}',
                   "schedule.curriculum={levels: [1, 2], window: 8, min_evidence: 4}")
    try:
        assert st.scheduler.curriculum is not None
    finally:
        st.metrics.close(), st.store.close()


def test_without_a_curriculum_the_scheduler_has_none(tmp_path):
    st, _ = _state(tmp_path)
    try:
        assert st.scheduler.curriculum is None
    finally:
        st.metrics.close(), st.store.close()


def test_a_fixed_order_reaches_the_scheduler(tmp_path):
    from posttrain.tasks.splits import make_splits

    ids = [t.id for t in make_splits(load_config(None, BASE)).train]
    order = tmp_path / "order.txt"
    order.write_text(f"{ids[0]} {ids[1]}\n{ids[2]} {ids[3]}\n")
    st, _ = _state(tmp_path, "schedule.name=fixed_order", f"schedule.args={{order_file: {order}}}")
    try:
        assert st.scheduler.order == [[ids[0], ids[1]], [ids[2], ids[3]]]
    finally:
        st.metrics.close(), st.store.close()
