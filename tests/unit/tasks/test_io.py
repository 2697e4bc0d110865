import json

import pytest

from posttrain.errors import TaskFileError
from posttrain.tasks import generate_domain
from posttrain.tasks.io import load_tasks, save_tasks


@pytest.mark.parametrize("suffix", [".jsonl", ".yaml"])
def test_roundtrip_preserves_versions(tmp_path, suffix):
    tasks = generate_domain("extraction", 3, 0) + generate_domain("scene", 2, 0)
    back = load_tasks(save_tasks(tasks, tmp_path / f"t{suffix}"))
    assert [t.version for t in back] == [t.version for t in tasks]


def test_jsonl_bad_json_names_file_and_line(tmp_path):
    p = tmp_path / "t.jsonl"
    good = json.dumps({"id": "a", "domain": "d", "prompt": [{"role": "user", "content": "x"}], "verifier": "math_answer"})
    p.write_text(good + "\n{not json\n")
    with pytest.raises(TaskFileError, match=r"t\.jsonl:2: invalid JSON"):
        load_tasks(p)


def test_jsonl_bad_field_names_field(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"id": "a", "domain": "d", "prompt": [{"role": "robot", "content": "x"}], "verifier": "v"}) + "\n")
    with pytest.raises(TaskFileError, match=r"t\.jsonl:1: field 'prompt\[0\]\.role': expected one of"):
        load_tasks(p)


def test_yaml_error_points_at_the_fields_line(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("- id: a\n  domain: d\n  verifier: v\n  prompt:\n    - role: user\n      content: hi\n  limits:\n    max_steps: -3\n")
    with pytest.raises(TaskFileError, match=r"t\.yaml:8: field 'limits\.max_steps': must be > 0"):
        load_tasks(p)


def test_missing_required_field_and_unknown_field(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"id": "a", "domain": "d", "verifier": "v"}) + "\n")
    with pytest.raises(TaskFileError, match="field 'prompt': missing required field"):
        load_tasks(p)
    p.write_text(json.dumps({"id": "a", "domain": "d", "verifier": "v", "prompt": [{"role": "user", "content": "x"}], "colour": 1}) + "\n")
    with pytest.raises(TaskFileError, match="field 'colour': unknown field"):
        load_tasks(p)


def test_duplicate_ids_and_unknown_suffix(tmp_path):
    t = generate_domain("math", 1, 0)
    p = save_tasks(t + t, tmp_path / "t.jsonl")
    with pytest.raises(TaskFileError, match="duplicate id"):
        load_tasks(p)
    with pytest.raises(TaskFileError, match="unknown task file type"):
        load_tasks(tmp_path / "t.csv")
    with pytest.raises(TaskFileError, match="no such task file"):
        load_tasks(tmp_path / "missing.jsonl")


def test_image_attachment_roundtrips(tmp_path):
    from posttrain.types import Attachment, Message, Spec, Task

    t = Task("img", "d", (Message("user", "what is shown?", attachments=(Attachment("image", "ab" * 32, "img/a.png"),)),), Spec("text_match", {"expected": "cat"}))
    (back,) = load_tasks(save_tasks([t], tmp_path / "t.yaml"))
    assert back.version == t.version and back.prompt[0].attachments[0].path == "img/a.png"
