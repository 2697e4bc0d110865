"""A rank that dies or freezes mid-training ends the job with one line naming it; never a hang."""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def job(tmp_path, kind, timeout_s):
    from posttrain.parallel.launch import run_ranks

    return run_ranks([sys.executable, str(HERE / "rank_job.py"), str(tmp_path / "out.pt"), kind], 2, timeout_s,
                     env={"OMP_NUM_THREADS": "1"})


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_killed_rank_fails_the_job_with_one_line_naming_it(tmp_path, capfd):
    code = job(tmp_path, "die", 20)
    err = capfd.readouterr().err
    assert code != 0
    assert "posttrain: error: rank 1 of 2 was killed by signal SIGKILL; stopped the other ranks" in err
    assert not (tmp_path / "out.pt").exists()


@pytest.mark.extended  # make test-extended: a slow check make test leaves out (docs/benchmarks.md)
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_frozen_rank_is_named_once_the_collective_timeout_passes(tmp_path, capfd):
    code = job(tmp_path, "hang", 10)
    err = capfd.readouterr().err
    assert code != 0
    assert "rank 1 of 2 stopped responding" in err
