"""Generation cache: (model hash, prompt, sampling params, seed, epoch) -> unverified trajectory.

    cache = GenerationCache(default_cache_path())
    traj = cache.get(key)            # None on a miss
    cache.put_many([(key, traj)])

Re-running a suite against a model it has seen (a new verifier, a resumed run in a new
directory, a comparison re-done) skips generation entirely; verification always runs
again, since the point of re-running is usually that the verifier changed. SQLite in WAL
mode, so several evaluations can share one cache file.

This is the one SQLite database outside posttrain/store, and on purpose: it is a cache shared
across runs (default_cache_path(), outside any run directory), not a run's
trajectories.sqlite, whose every read goes through store/run_queries.py
(tests/unit/core/test_run_dir_owner.py allows this module by name).

Limits: an engine that samples a whole batch from one generator makes a sample depend on
its batch-mates, so a cached sample is a valid draw for its key but not necessarily the
bit-identical one a fresh run would produce (at temperature 0 it is the same).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Sequence

from posttrain.eval.trajio import trajectory_from_dict, trajectory_to_dict
from posttrain.types import Trajectory


def default_cache_path() -> Path:
    root = os.environ.get("POSTTRAIN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "posttrain")
    return Path(root) / "generations.sqlite"


# Revision of the sampler's draws, in every sampled (temperature > 0) key. 2: the fast engine's sampler before
# 2026-12-07 drew a random column in 0.29-1.6% of draws (its 24-bit uniforms rounded to 1.0; docs/rollout.md);
# what it cached were not draws from the model, and keys without this are never asked for again. Greedy keys
# carry no revision: greedy decoding never drew, and its entries stay valid.
SAMPLED_DRAWS_REVISION = 2


def cache_key(model_hash: str, prompt_ids: Sequence[int], sampling: dict[str, Any], seed: int, epoch: int) -> str:
    if float(sampling.get("temperature", 0.0)) > 0:
        sampling = {**sampling, "draws": SAMPLED_DRAWS_REVISION}
    blob = json.dumps([model_hash, list(prompt_ids), sampling, seed, epoch], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class GenerationCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS gen (key TEXT PRIMARY KEY, traj TEXT NOT NULL)")
        self._db.commit()
        self.hits = 0
        self.misses = 0

    def get_many(self, keys: Sequence[str]) -> dict[str, Trajectory]:
        out: dict[str, Trajectory] = {}
        for i in range(0, len(keys), 500):  # SQLite's bound-parameter limit
            chunk = list(keys[i:i + 500])
            q = f"SELECT key, traj FROM gen WHERE key IN ({','.join('?' * len(chunk))})"
            for k, blob in self._db.execute(q, chunk):
                try:
                    out[k] = trajectory_from_dict(json.loads(blob))
                except (ValueError, TypeError):
                    continue  # an unreadable entry is a miss; it is overwritten below
        self.hits += len(out)
        self.misses += len(keys) - len(out)
        return out

    def put_many(self, items: Iterable[tuple[str, Trajectory]]) -> None:
        rows = [(k, json.dumps(trajectory_to_dict(t), separators=(",", ":"))) for k, t in items]
        self._db.executemany("INSERT OR REPLACE INTO gen VALUES (?, ?)", rows)
        self._db.commit()

    def close(self) -> None:
        self._db.close()
