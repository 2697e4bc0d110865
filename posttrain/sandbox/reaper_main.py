"""The reaper process itself (`python -m posttrain.sandbox.reaper_main PID`), started by
`reaper.ensure_started`: it waits for PID's pipe to close, then removes PID's cgroups.

Kept apart from reaper.py so that cgroups.py (which starts the reaper) and this module
(which calls cgroups.remove_all_of) do not import each other.
"""

from __future__ import annotations

import os
import sys

import posttrain.sandbox.cgroups as cgroups


def main(argv: list[str]) -> int:
    watched = int(argv[0])
    while True:  # EOF arrives only when every copy of the write end is closed: PID is gone
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    cgroups.remove_all_of(watched)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
