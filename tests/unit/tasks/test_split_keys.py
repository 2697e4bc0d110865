"""Split keys of issue 38: held-out task files (disjoint from training, pinned), the file tasks'
format rule by key, and tasks.sft_frac applied only when an SFT warm-up runs."""

import dataclasses

import pytest

from posttrain.config import load_config
from posttrain.config_check import check_config
from posttrain.errors import ConfigError
from posttrain.tasks import generate_domain
from posttrain.tasks.io import load_tasks, save_tasks
from posttrain.tasks.splits import make_splits, pin_splits
from posttrain.verifiers.rules import rule_for


@pytest.fixture
def files(tmp_path):
    tasks = generate_domain("arithmetic", 10, seed=0)
    save_tasks(tasks[:6], tmp_path / "train.jsonl")
    save_tasks(tasks[6:], tmp_path / "heldout.jsonl")
    save_tasks(tasks[5:7], tmp_path / "overlap.jsonl")  # one id of each
    return tmp_path, tasks


def cfg(*overrides):
    return load_config(None, ["tasks.domains={}", "sft.steps=0", *overrides])


def test_heldout_files_are_held_out_not_trained_on(files):
    d, tasks = files
    sp = make_splits(cfg(f"tasks.files=[{d / 'train.jsonl'}]", f"tasks.heldout_files=[{d / 'heldout.jsonl'}]"))
    assert [t.id for t in sp.train] == [t.id for t in tasks[:6]]
    assert [t.id for t in sp.held_out] == [t.id for t in tasks[6:]]


def test_heldout_files_are_pinned_in_the_run_directory(files, tmp_path):
    d, tasks = files
    sp = make_splits(cfg(f"tasks.files=[{d / 'train.jsonl'}]", f"tasks.heldout_files=[{d / 'heldout.jsonl'}]"))
    pin_splits(sp, tmp_path / "run")
    assert [t.id for t in load_tasks(tmp_path / "run" / "tasks" / "heldout.jsonl")] == [t.id for t in tasks[6:]]


def test_a_heldout_id_that_is_also_a_training_id_is_refused_at_config_load(files):
    d, _ = files
    c = cfg(f"tasks.files=[{d / 'train.jsonl'}]", f"tasks.heldout_files=[{d / 'overlap.jsonl'}]")
    with pytest.raises(ConfigError, match=r"repeated: 'arithmetic-0-5' \(.*train.jsonl and held-out file"):
        check_config(c, needs=("tasks",))
    with pytest.raises(ConfigError, match="repeated"):
        make_splits(c)


def test_a_missing_heldout_file_is_named_by_its_key(files):
    d, _ = files
    with pytest.raises(ConfigError, match="tasks.heldout_files: task file not found"):
        check_config(cfg(f"tasks.files=[{d / 'train.jsonl'}]", f"tasks.heldout_files=[{d / 'none.jsonl'}]"),
                     needs=("tasks",))


def test_answer_format_key_sets_the_rule_of_file_tasks_that_name_none(files, tmp_path):
    d, tasks = files
    own = dataclasses.replace(tasks[0], id="own-format", metadata={**tasks[0].metadata, "answer_format": "line"})
    save_tasks([tasks[1], own], tmp_path / "mixed.jsonl")
    plain = make_splits(cfg(f"tasks.files=[{tmp_path / 'mixed.jsonl'}]")).train
    keyed = make_splits(cfg(f"tasks.files=[{tmp_path / 'mixed.jsonl'}]", "tasks.answer_format=text")).train
    assert rule_for(plain[0]).single_line  # the default: a one-step task with a plain verifier answers on one line
    assert not rule_for(keyed[0]).single_line  # tasks.answer_format=text: several lines
    assert rule_for(keyed[1]).single_line  # the task's own metadata.answer_format wins


def test_sft_frac_takes_rl_prompts_only_when_an_sft_warm_up_runs(files):
    d, _ = files
    no_sft = make_splits(cfg(f"tasks.files=[{d / 'train.jsonl'}]", "tasks.sft_frac=0.5"))
    with_sft = make_splits(cfg(f"tasks.files=[{d / 'train.jsonl'}]", "tasks.sft_frac=0.5", "sft.steps=5"))
    assert no_sft.sft == [] and len(no_sft.rl) == 6
    assert len(with_sft.sft) == 3 and len(with_sft.rl) == 3
