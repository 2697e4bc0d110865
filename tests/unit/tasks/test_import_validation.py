"""Importers: ids unique across sources and splits, Dockerfile lines that are not reproduced are named."""

import json
import warnings

import pytest

from posttrain.errors import TaskFileError
from posttrain.tasks.harbor import HarborImportWarning, load_harbor_tasks
from posttrain.tasks.io import save_tasks
from posttrain.tasks.trl_rows import load_trl_rows
from tests.unit.tasks.test_interop import harbor_folder


def _verl_row(source, split, index, q):
    return {"data_source": source, "prompt": [{"role": "user", "content": q}],
            "reward_model": {"ground_truth": "1"}, "extra_info": {"split": split, "index": index}}


def test_verl_rows_of_two_splits_and_sources_get_distinct_ids(tmp_path):
    p = tmp_path / "rows.jsonl"
    rows = [_verl_row("gsm8k", "train", 0, "a"), _verl_row("gsm8k", "test", 0, "b"), _verl_row("math", "train", 0, "c")]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ids = [t.id for t in load_trl_rows(p)]
    assert len(set(ids)) == 3 and ids[0] == "gsm8k-train-0"


def test_repeated_ids_in_one_file_become_unique_and_save_back(tmp_path):
    p = tmp_path / "rows.jsonl"
    rows = [{"id": "q1", "prompt": "2+2?", "answer": "4"}, {"id": "q1", "prompt": "3+3?", "answer": "6"},
            {"id": "q1", "prompt": "3+3?", "answer": "6"}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = load_trl_rows(p)
    assert tasks[0].id == "q1" and len({t.id for t in tasks}) == 3
    save_tasks(tasks, tmp_path / "out.jsonl")  # the project's own validator accepts them


def test_dockerfile_run_lines_are_warned_about_per_task(tmp_path):
    d = harbor_folder(tmp_path)
    (d / "environment" / "Dockerfile").write_text("FROM ubuntu\nWORKDIR /app\nRUN apt-get install -y \\\n  jq\nENV X=1\n")
    with pytest.warns(HarborImportWarning, match=r"harbor task hello: 2 Dockerfile line\(s\).*RUN apt-get install -y"):
        (t,) = load_harbor_tasks(d, environment="host")
    assert list(t.metadata["unreproduced_dockerfile"]) == ["RUN apt-get install -y    jq", "ENV X=1"]


def test_a_dockerfile_with_only_from_raises_no_warning(tmp_path):
    d = harbor_folder(tmp_path)
    (d / "environment" / "Dockerfile").write_text("FROM ubuntu\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", HarborImportWarning)
        load_harbor_tasks(d, environment="host")


def test_building_a_dockerfile_that_cannot_be_reproduced_names_its_line(tmp_path):
    d = harbor_folder(tmp_path)
    (d / "environment" / "Dockerfile").write_text("# base\nFROM ubuntu:22.04\nRUN apt-get install -y jq\n")
    with pytest.raises(TaskFileError, match=r"Dockerfile:2: base image 'ubuntu:22.04' is not a Debian suite"):
        load_harbor_tasks(d)
