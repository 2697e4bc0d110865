"""When an evaluation's infrastructure failed: the share of samples nobody could judge, and
the commonest cause, so a broken run fails with one line instead of a table of NaN.

    failed = infra_failure(records, max_rate=0.2)   # None, or "80 of 80 samples (100%) ..."

A sample is an infrastructure error when the engine, sandbox or verifier failed (records.py);
its cause is the error's message, or the verifier's reason (`verifier raised ConfigError:
unknown verifier 'sorted_list'`). Such records are never reused by a resumed run (runner.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from posttrain.eval.records import SampleRecord

DEFAULT_MAX_INFRA_RATE = 0.2  # as rl.infra_error.threshold: a fifth of the samples unjudged is a broken run


def infra_cause(rec: SampleRecord) -> str:
    if rec.error and rec.error.get("message"):
        boundary, msg = rec.error.get("boundary", "engine"), rec.error["message"]
        return msg if msg.startswith(boundary) else f"{boundary}: {msg}"
    return rec.reason or "unknown cause"


def commonest_cause(records: Iterable[SampleRecord]) -> tuple[str, int]:
    counts = Counter(infra_cause(r) for r in records if r.infra_error)
    return counts.most_common(1)[0] if counts else ("", 0)


def infra_failure(records: Iterable[SampleRecord], max_rate: float) -> str | None:
    """One line when more than `max_rate` of the samples are infrastructure errors (always at 100%)."""
    recs = list(records)
    bad = [r for r in recs if r.infra_error]
    if not recs or not bad:
        return None
    rate = len(bad) / len(recs)
    if rate <= max_rate and len(bad) < len(recs):
        return None
    cause, n = commonest_cause(bad)
    return (f"{len(bad)} of {len(recs)} samples ({rate:.0%}) are infrastructure errors, over the limit "
            f"{max_rate:.0%}; commonest cause ({n}x): {cause}")
