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


# Files whose tests start several torch processes of their own (ranks, Ray actors): run one after the other
# on one worker, while the other worker takes everything else. Two of them at once on 2 cores oversubscribe
# the machine (ranks and actors wait on each other's collectives): with them spread over both workers the
# suite's summed test time rose from 1,233 to 1,333 s (fresh clones, 2-core AMD EPYC, 2026-12-05). Their
# summed time (about 550 s) is near half the suite's, so the two workers still end together.
TOGETHER = (
    "tests/unit/distributed/test_ray_cluster.py",
    "tests/integration/test_cli_sft_resume.py",
    "tests/unit/train/sharded/test_sharded_equivalence.py",
    "tests/unit/train/sharded/test_sharded_rl_resume.py",
    "tests/unit/train/sharded/test_sharded_failure.py",
    "tests/unit/train/sharded/test_sharded_sft_resume.py",
    "tests/integration/test_sharded_cli.py",
)

# Run first, in this order: the files above as one unit, then the longest of the others (summed test time in a
# fresh-clone `make test`, 2026-12-05: 54, 42, 35, 34, 32, 31, 28 s), so that the suite ends on short files.
# The Makefile passes --no-loadscope-reorder: xdist's default reorder puts the files with the most tests
# first. Only the order changes; a file missing from this list runs in its turn.
RUN_FIRST = TOGETHER + (
    "tests/integration/test_cli_newcomer.py",
    "tests/integration/test_cli_rl.py",
    "tests/integration/test_serve_proxy.py",
    "tests/integration/test_async_rl_cli.py",
    "tests/integration/test_cli_distill.py",
    "tests/integration/test_models_cli.py",
    "tests/unit/verifiers/test_humaneval_adversarial.py",
)


def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with the TOGETHER files as one work unit (one worker, in order)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class TogetherFirst(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "TOGETHER" if path in TOGETHER else path

    return TogetherFirst(config, log)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(RUN_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(RUN_FIRST)))  # stable: files stay whole
