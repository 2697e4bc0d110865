"""The real CLI on a config key in an older shape: one `posttrain: note:` line saying what to write,
then the key read in its new place (here an unknown name, refused at load naming the new key)."""

from pathlib import Path
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_an_old_key_is_one_note_line_and_is_read_in_its_new_place(tmp_path):
    out = tmp_path / "run"
    r = run_cli(["rl", "examples/tiny_rl.yaml", "schedule.policy=greedy",
                        "--out", str(out)], cwd=ROOT, timeout=120)
    assert r.returncode == 2 and not out.exists(), r.stderr[-1500:]
    assert r.stderr.strip().splitlines() == [
        "posttrain: note: config key schedule.policy (override) is deprecated: write schedule.name",
        "posttrain: error: schedule.name='greedy' is not a registered sched_policy; known: difficulty_pools, "
        "fixed_order, learning_signal, uniform"]
