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
