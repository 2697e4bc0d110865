"""JSONL round trip: images as files beside the task file, same task.version after loading."""

from __future__ import annotations

import json

from posttrain.tasks import images
from posttrain.tasks.io import load_tasks, save_tasks

from .conftest import make_tasks


def test_jsonl_round_trip_keeps_versions_and_writes_image_files(tmp_path):
    tasks = make_tasks("ui", n=5)
    path = save_tasks(tasks, tmp_path / "suite" / "ui.jsonl")
    files = sorted((tmp_path / "suite" / "images").iterdir())
    assert len(files) == len({t.prompt[0].attachments[0].sha256 for t in tasks})
    assert [t.version for t in load_tasks(path)] == [t.version for t in tasks]


def test_rows_hold_no_inline_image_bytes(tmp_path):
    path = save_tasks(make_tasks("chart", n=3), tmp_path / "c.jsonl")
    for line in path.read_text().splitlines():
        att = json.loads(line)["prompt"][0]["attachments"][0]
        assert set(att) == {"kind", "sha256", "path", "mime"} and len(line) < 2000


def test_loaded_tasks_find_images_beside_the_file_in_a_fresh_process(tmp_path, monkeypatch):
    tasks = make_tasks("drawing", n=3)
    path = save_tasks(tasks, tmp_path / "d" / "d.jsonl")
    images._MEM.clear()  # as in a new process, with an empty disk cache
    monkeypatch.setenv("POSTTRAIN_IMAGE_DIR", str(tmp_path / "empty"))
    loaded = load_tasks(path)
    assert images.image_bytes(loaded[0].prompt[0].attachments[0])[:4] == b"\x89PNG"
