"""Suite-wide set-up.

SIGINT: a job started in the background by a shell without job control (`cmd &` in a script,
`nohup`, some CI runners) begins with SIGINT ignored, every child inherits that through exec,
and Python then leaves it ignored: the CLI would never see the Ctrl-C the interrupt tests send
(tests/integration/test_cli_rl.py, test_async_rl_cli.py). Installing Python's own handler here
gives every process the tests start the default disposition, as under an interactive shell.
"""

import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
