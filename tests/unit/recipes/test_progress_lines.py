"""A recipe's log lines reach a log file whole, as written (cli/common.py PhaseProgress)."""

from __future__ import annotations

from posttrain.cli.common import PhaseProgress

LINE = ("  tasks.answer_format=None   a one-step file task with a plain verifier must answer on one line "
        "(task metadata.answer_format wins); off: tasks.answer_format=text [see docs/training.md]")


def test_a_long_log_line_is_one_line_off_a_terminal(capsys):
    PhaseProgress()("log", {"line": LINE})
    assert capsys.readouterr().out == LINE + "\n"
