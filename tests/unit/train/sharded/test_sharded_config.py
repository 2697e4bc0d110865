"""trainer.world_size / tp checks and the launcher's reading of the command line (no processes)."""

import pytest

from posttrain.config import load_config
from posttrain.config_check import check_sharded
from posttrain.errors import ConfigError
from posttrain.parallel.launch import _trainer_settings


def test_tp_that_does_not_divide_the_world_size_is_refused():
    with pytest.raises(ConfigError, match="trainer.tp=3 must divide the world size 4"):
        check_sharded(load_config(None, ["trainer.world_size=4", "trainer.tp=3"]))


def test_tp_that_does_not_divide_the_heads_is_refused():
    cfg = load_config(None, ["trainer.world_size=4", "trainer.tp=4", "model.tiny.num_key_value_heads=2"])
    with pytest.raises(ConfigError, match="num_key_value_heads=2 does not divide"):
        check_sharded(cfg)


def test_features_the_sharded_trainer_lacks_are_named():
    with pytest.raises(ConfigError, match=r"trainer.lora is not supported"):
        check_sharded(load_config(None, ["trainer.world_size=2", "rl.kl_coef=0.1", "trainer.lora={r: 4}"]))


def test_asynchronous_rl_is_refused_on_several_ranks_before_any_work():
    with pytest.raises(ConfigError, match=r"rl.max_staleness >= 1 \(its off-policy correction\) is not supported"):
        check_sharded(load_config(None, ["trainer.world_size=2", "rl.max_staleness=1"]))


def test_a_kl_term_is_accepted_on_several_ranks():
    check_sharded(load_config(None, ["trainer.world_size=2", "rl.kl_coef=0.1"]))  # the reference is sharded too


def test_mixed_precision_outside_its_choices_is_a_config_error():
    with pytest.raises(ConfigError, match="trainer.mixed_precision"):
        load_config(None, ["trainer.mixed_precision=fp8"])


def test_launcher_reads_world_size_and_timeout_from_overrides_then_yaml(tmp_path):
    y = tmp_path / "run.yaml"
    y.write_text("trainer: {world_size: 3, timeout_s: 42}\n")
    assert _trainer_settings(["sft", str(y)]) == (3, 42.0)
    assert _trainer_settings(["sft", str(y), "trainer.world_size=2"]) == (2, 42.0)
    assert _trainer_settings(["rl", "rl.steps=3"]) == (1, 300.0)


def test_launcher_reads_a_resumed_runs_world_size_from_its_config_unless_overridden(tmp_path):
    from posttrain.cli.main import resumed_run_config
    from posttrain.store.run import RunDir

    RunDir(tmp_path).config.write_text("trainer: {world_size: 2, timeout_s: 42}\n")
    for argv in (["sft", "--resume", str(tmp_path)], ["dpo", f"--resume={tmp_path}"]):
        assert _trainer_settings(argv, resumed_run_config(argv)) == (2, 42.0)
    argv = ["sft", "--resume", str(tmp_path), "trainer.world_size=1"]
    assert _trainer_settings(argv, resumed_run_config(argv)) == (1, 42.0)


def test_an_unknown_launcher_is_named_with_the_known_ones():
    with pytest.raises(ConfigError, match=r"'trainer.launcher' .*: Input should be 'local' or 'ray'"):
        check_sharded(load_config(None, ["trainer.world_size=2", "trainer.launcher=slurm"]))


def test_the_ray_launcher_without_a_cluster_address_is_refused():
    with pytest.raises(ConfigError, match="trainer.launcher=ray needs cluster.address"):
        check_sharded(load_config(None, ["trainer.world_size=2", "trainer.launcher=ray"]))


def test_the_launch_refuses_a_bad_launcher_before_starting_anything(monkeypatch, capsys, tmp_path):
    from posttrain.distributed.trainer_group import launch_ray_group
    from posttrain.parallel.launch import launch_local, maybe_spawn

    launchers = {"local": launch_local, "ray": launch_ray_group}  # what the CLI wires

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    y = tmp_path / "run.yaml"
    y.write_text("trainer: {world_size: 2, launcher: ray}\n")  # read from the YAML, no cluster.address anywhere
    with pytest.raises(SystemExit) as e:
        maybe_spawn(["sft", str(y)], launchers)
    assert e.value.code == 2 and "trainer.launcher=ray needs cluster.address" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        maybe_spawn(["sft", str(y), "trainer.launcher=slurm"], launchers)
    assert e.value.code == 2 and "unknown trainer.launcher 'slurm'; known: local, ray" in capsys.readouterr().err


RANK_WAITS = ("import os, sys, time\n"
              "from posttrain.parallel.rank_parent import die_with_launcher\n"
              "die_with_launcher()\n"
              "open(sys.argv[1] + os.environ['RANK'], 'w').write(str(os.getpid()))\n"
              "time.sleep(120)\n")
LAUNCHER = ("import sys\n"
            "from posttrain.parallel.launch import run_ranks\n"
            "run_ranks([sys.executable, '-c', sys.argv[1], sys.argv[2]], 2, 60)\n")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False


def test_ranks_in_their_own_process_group_die_with_a_killed_launcher(tmp_path):
    """run_ranks puts the ranks in their own process group (Ctrl-C to the launcher alone): a SIGKILL of
    the launcher must still end them, not leave them training as orphans."""
    import os
    import signal
    import subprocess
    import sys
    import time

    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, RANK_WAITS, str(tmp_path / "pid")])
    try:
        deadline = time.time() + 120  # a hang guard: two small interpreters start
        while not all((tmp_path / f"pid{r}").is_file() for r in (0, 1)):
            assert time.time() < deadline and launcher.poll() is None
            time.sleep(0.1)
        ranks = [int((tmp_path / f"pid{r}").read_text()) for r in (0, 1)]
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        deadline = time.time() + 60
        while any(_alive(p) for p in ranks):
            assert time.time() < deadline, "a rank outlived its killed launcher"
            time.sleep(0.1)
    finally:
        launcher.kill()
