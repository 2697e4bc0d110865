"""The zygote's agent scripts (`agent/`), placed where the sandbox's unprivileged uid can
bind them from, with their bytecode."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from posttrain.sandbox.runtime import sandbox_home


def agent_dir() -> Path:
    """The agent scripts, copied where the unprivileged sandbox uid can bind them from.

    One directory per content hash: processes running different versions of posttrain on
    one machine (an upgrade while a run is going) never overwrite each other's agent."""
    files = {f.name: f.read_bytes() for f in sorted((Path(__file__).parent / "agent").glob("*.py"))}
    key = hashlib.sha256(b"".join(n.encode() + b"\0" + t for n, t in files.items())).hexdigest()[:16]
    top = sandbox_home() / "agent"
    top.mkdir(exist_ok=True)
    os.chmod(top, 0o755)
    d = top / key
    d.mkdir(exist_ok=True)
    os.chmod(d, 0o755)
    for name, text in files.items():
        dst = d / name
        if not dst.exists() or dst.read_bytes() != text:
            tmp = d / f".{name}.{os.getpid()}"
            tmp.write_bytes(text)
            os.chmod(tmp, 0o644)
            tmp.replace(dst)
        _precompile(dst)
    return d


def _precompile(src: Path) -> None:
    """Bytecode next to the module: the sandbox (read-only bind, no bytecode writing) would
    otherwise compile execution.py at every zygote start, i.e. every fresh execution. The
    sandbox runs this same interpreter; the directory is content-addressed, so the pyc
    never needs checking against its source."""
    import importlib.util
    import py_compile

    cache = Path(importlib.util.cache_from_source(str(src)))
    if cache.exists():
        return
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
    py_compile.compile(str(src), cfile=str(tmp), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    os.chmod(cache.parent, 0o755)
    os.chmod(tmp, 0o644)
    tmp.replace(cache)
