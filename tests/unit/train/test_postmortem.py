"""Post-mortem: failed attempts + verifier feedback -> corrected-attempt SFT rows and DPO pairs."""

import json

import pytest

from posttrain.errors import TaskFileError
from posttrain.store.trajectories import TrajectoryStore
from posttrain.train.postmortem import build_examples, postmortem
from posttrain.types import ExecResult, Message, Spec, Task, ToolCall, Trajectory, Turn, VerifyResult

TASK = Task("t1", "code", (Message("user", "write f"),), Spec("exact"), oracle="def f(): return 1")


def _traj(step, text, verify, task=TASK, turns=None, sample=0, prompt_ids=(5, 6)):
    turns = turns or (Turn("assistant", text, (1,), (0.0,)),)
    return Trajectory(task.id, task.version, task.domain, tuple(prompt_ids), turns, reward=verify.score, verify=verify,
                      step=step, sample=sample)


FAIL = VerifyResult.fail("tests failed", error="assert f() == 1", stderr="AssertionError", expected="1")


def test_failure_gets_feedback_and_the_later_success_as_target():
    trajs = [_traj(0, "def f(): return 2", FAIL), _traj(3, "def f(): return 1", VerifyResult(1.0, True)),
             _traj(5, "def f(): return 1 # late", VerifyResult(1.0, True))]
    sft, dpo, counts = build_examples(trajs, {"t1": TASK})
    assert counts["from_later_success"] == 1 and len(sft) == 1
    msgs = sft[0]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[1]["content"] == "def f(): return 2"
    fb = msgs[2]["content"]
    assert "tests failed" in fb and "assert f() == 1" in fb and "AssertionError" in fb
    assert "expected" not in fb  # the answer is not leaked into the prompt
    assert msgs[3]["content"] == "def f(): return 1"  # the earliest later success
    assert dpo == [{"prompt": [{"role": "user", "content": "write f"}], "chosen": "def f(): return 1",
                    "rejected": "def f(): return 2", "meta": {"task_id": "t1", "step": 0}}]


def test_failure_without_later_success_uses_the_oracle():
    trajs = [_traj(0, "nope", VerifyResult.fail("syntax error", error="invalid syntax")),
             _traj(4, "x", VerifyResult(1.0, True)),  # a success before a failure does not correct it
             _traj(6, "still no", FAIL)]
    sft, _, counts = build_examples(trajs, {"t1": TASK})
    assert counts["from_later_success"] == 1 and counts["from_oracle"] == 1
    assert sft[1]["messages"][-1]["content"] == TASK.oracle


def test_infra_errors_and_duplicates_are_not_post_mortems():
    trajs = [_traj(0, "a", VerifyResult.infra("sandbox down")), _traj(1, "b", FAIL), _traj(1, "b", FAIL, sample=1)]
    sft, _, counts = build_examples(trajs, {"t1": TASK})
    assert counts["failed"] == 2 and len(sft) == 1


def test_multi_turn_marks_the_failing_step_and_its_observation():
    bad = ExecResult("nonzero_exit", exit_code=1, stderr="No such file")
    turns = (Turn("assistant", "<tool_call>ls x</tool_call>", (1,), (0.0,), tool_call=ToolCall("sh", {"cmd": "ls x"})),
             Turn("tool", "ls: x: No such file", trainable=False, exec_result=bad),
             Turn("assistant", "done", (2,), (0.0,)))
    sft, dpo, counts = build_examples([_traj(0, "", FAIL, turns=turns)], {"t1": TASK})
    msgs = sft[0]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert "failed at step 1 of 2" in msgs[4]["content"] and "ls: x: No such file" in msgs[4]["content"]
    assert counts["multi_turn"] == 1 and dpo == []  # no single completion to prefer


def test_postmortem_writes_files_the_recipes_load(tmp_path):
    from posttrain.models.tiny import build_tokenizer
    from posttrain.train.chat_data import load_sft_jsonl
    from posttrain.train.dpo import load_pairs_jsonl

    from posttrain.rollout.prompting import encode_prompt

    tok = build_tokenizer()
    tok.save_pretrained(tmp_path / "base-model")  # no config.yaml: the prompt is decoded from its token ids
    ids = encode_prompt(tok, TASK.prompt)
    s = TrajectoryStore(tmp_path / "trajectories.sqlite")
    s.put_many([_traj(0, "2", FAIL, prompt_ids=ids), _traj(1, "1", VerifyResult(1.0, True), prompt_ids=ids)])
    s.close()
    summary = postmortem(tmp_path)
    assert summary["sft_rows"] == 1 and summary["dpo_pairs"] == 1
    out = tmp_path / "postmortem"
    conv = load_sft_jsonl(out / "sft.jsonl")[0]
    assert conv[0] == Message("user", "write f") and conv[-1] == Message("assistant", "1")
    pair = load_pairs_jsonl(out / "dpo.jsonl", build_tokenizer())[0]
    assert pair.chosen != pair.rejected
    assert json.loads((out / "summary.json").read_text())["failed"] == 1


def test_not_a_run_directory_is_named(tmp_path):
    with pytest.raises(TaskFileError, match="not a run directory"):
        postmortem(tmp_path)
