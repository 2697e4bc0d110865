"""Print uv's flags for the package sources pip is configured with (used by `make install`).

`make install` installs with uv, which fetches and unpacks in parallel (about 25 s for the whole
dev environment on a fresh 2-core machine, against 110 s for pip), but it must take each package
from where pip would: a machine's pip configuration (pip.conf files and PIP_* variables) may point
at local wheel folders and mirrors (here: a CPU build of torch). `pip config list` shows every
layer; each key below becomes the uv flag of the same meaning. Keys uv has no flag for are left
out; if uv then fails, the Makefile installs with pip instead.

    python tools/uv_sources.py   ->  --index-strategy unsafe-best-match --find-links /opt/wheels ...
"""

from __future__ import annotations

import subprocess
import sys

FLAGS = {"find-links": "--find-links", "index-url": "--index-url", "extra-index-url": "--extra-index-url",
         "constraint": "--constraint"}


def uv_flags(pip_config: str) -> list[str]:
    """`pip config list` lines (`global.find-links='/opt/wheels'`, `:env:.extra-index-url='a b'`) -> flags."""
    flags = ["--index-strategy", "unsafe-best-match"]  # pip's rule: the best version across every index
    seen: set[tuple[str, str]] = set()
    for line in pip_config.splitlines():
        key, sep, value = line.partition("=")
        flag = FLAGS.get(key.rsplit(".", 1)[-1])
        if not sep or flag is None:
            continue
        for v in value.strip().strip("'\"").split():  # pip separates several values by whitespace
            if (flag, v) not in seen:
                seen.add((flag, v))
                flags += [flag, v]
    return flags


if __name__ == "__main__":
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=True).stdout
    print(" ".join(uv_flags(listed)))
