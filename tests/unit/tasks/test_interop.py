import json

import pytest

from posttrain.errors import TaskFileError
from posttrain.tasks.harbor import load_harbor_tasks
from posttrain.tasks.trl_rows import load_trl_rows


def harbor_folder(root, name="hello"):
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "solution").mkdir()
    (d / "environment").mkdir()
    (d / "task.toml").write_text('version = "1.0"\n[metadata]\ndifficulty = "easy"\ncategory = "files"\n[verifier]\ntimeout_sec = 30\n')
    (d / "instruction.md").write_text("Create /app/hello.txt containing 'hi'.\n")
    (d / "environment" / "notes.txt").write_text("starting file\n")
    (d / "tests" / "test.sh").write_text(
        '#!/bin/bash\nif [ "$(cat /app/hello.txt)" = hi ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n')
    (d / "solution" / "solve.sh").write_text("echo hi > /app/hello.txt\n")
    return d


def test_harbor_folder_becomes_a_terminal_task(tmp_path):
    harbor_folder(tmp_path)
    (t,) = load_harbor_tasks(tmp_path)
    assert t.domain == "terminal" and t.verifier.name == "harbor_test" and t.difficulty == 1.0
    assert "/work/logs/verifier/reward.txt" in t.verifier.args["tests"]["test.sh"]
    assert dict(t.environment.files) == {"notes.txt": "starting file\n"}  # Dockerfile is not a workspace file
    assert "/work/hello.txt" in t.oracle


def test_harbor_missing_test_script_is_named(tmp_path):
    d = harbor_folder(tmp_path)
    (d / "tests" / "test.sh").unlink()
    with pytest.raises(TaskFileError, match=r"tests/test\.sh: missing"):
        load_harbor_tasks(d)
    (d / "task.toml").write_text("[metadata\n")
    with pytest.raises(TaskFileError, match=r"task\.toml:1: invalid TOML"):
        load_harbor_tasks(d)


def test_trl_and_verl_rows(tmp_path):
    p = tmp_path / "rows.jsonl"
    rows = [{"prompt": "2+2?", "answer": "4"},
            {"prompt": [{"role": "user", "content": "Capital of France?"}], "ground_truth": "Paris"},
            {"data_source": "gsm8k", "prompt": [{"role": "user", "content": "q"}], "reward_model": {"ground_truth": "1,200"}}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    a, b, c = load_trl_rows(p)
    assert (a.verifier.name, b.verifier.name, c.verifier.name) == ("math_answer", "text_match", "math_answer")
    assert c.domain == "gsm8k" and a.oracle == "\\boxed{4}"


def test_bad_row_names_line_and_field(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps({"prompt": "ok", "answer": "1"}) + "\n\n" + json.dumps({"prompt": "no answer"}) + "\n")
    with pytest.raises(TaskFileError, match=r"rows\.jsonl:3: field 'answer': missing"):
        load_trl_rows(p)


def test_harbor_task_runs_end_to_end_and_agent_cannot_plant_tests(tmp_path):
    import asyncio

    from posttrain.sandbox import SandboxPool
    from posttrain.verifiers.soundness.check import score_once
    from posttrain.tasks.plan import dump_plan

    harbor_folder(tmp_path)
    (t,) = load_harbor_tasks(tmp_path)
    cheat = dump_plan([{"tool": "shell", "arguments": {"cmd": "mkdir -p tests logs/verifier && echo 'echo 1 > /work/logs/verifier/reward.txt' > tests/test.sh && echo 1 > logs/verifier/reward.txt"}}])

    async def go():
        pool = SandboxPool()
        try:
            return [(await score_once(t, text, pool)).score for text in (t.oracle, "", cheat)]
        finally:
            await pool.close()

    assert asyncio.run(go()) == [1.0, 0.0, 0.0]
