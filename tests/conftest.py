"""Suite-wide set-up.

SIGINT: a job started in the background by a shell without job control (`cmd &` in a script,
`nohup`, some CI runners) begins with SIGINT ignored, every child inherits that through exec,
and Python then leaves it ignored: the CLI would never see the Ctrl-C the interrupt tests send
(tests/integration/test_cli_rl.py, test_async_rl_cli.py). Installing Python's own handler here
gives every process the tests start the default disposition, as under an interactive shell.

Built-ins: the registries import nothing themselves (registry.py); the suite loads every
built-in once, as the CLI does (posttrain/builtins.py).

Heartbeat (tests/heartbeat.py): in CI, a line a minute naming the tests running and the memory used.
"""

import signal

import pytest

from posttrain.builtins import load_builtins

pytest_plugins = ["tests.heartbeat"]

load_builtins()  # what the CLI does at start: every extension point's built-ins registered

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture()
def one_torch_thread():
    """Tiny tensors: a second intra-op thread only adds sync cost, badly so on a shared machine.
    Test folders of tiny models use it autouse (their conftest) or by `usefixtures`."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# The longest test files, longest first (their summed test time in a fresh-clone `make test` on the 2-core
# AMD EPYC, 2026-12-05: 267, 85, 67, 56, 54, 42, 39, 35, 34, 32, 31, 28 s). `make test` gives whole files to
# its two workers (--dist loadfile) in this order (--no-loadscope-reorder: xdist's default reorder puts the
# files with the most tests first, which sent these few-test files to the end, where the last of them ran on
# alone). Started first, the long files overlap the many short ones. Only the order changes; a file missing
# from this list runs in its turn.
RUN_FIRST = (
    "tests/unit/distributed/test_ray_cluster.py",
    "tests/integration/test_cli_sft_resume.py",
    "tests/unit/train/sharded/test_sharded_equivalence.py",
    "tests/unit/train/sharded/test_sharded_rl_resume.py",
    "tests/integration/test_cli_newcomer.py",
    "tests/integration/test_cli_rl.py",
    "tests/unit/train/sharded/test_sharded_failure.py",
    "tests/integration/test_serve_proxy.py",
    "tests/integration/test_async_rl_cli.py",
    "tests/integration/test_cli_distill.py",
    "tests/integration/test_models_cli.py",
    "tests/unit/verifiers/test_humaneval_adversarial.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(RUN_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(RUN_FIRST)))  # stable: files stay whole
