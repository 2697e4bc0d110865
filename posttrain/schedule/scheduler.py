"""The task scheduler: which tasks the next RL step samples.

    sched = Scheduler(tasks, {"arithmetic": 0.7, "code": 0.3}, policy="learning_signal", seed=0)
    batch = sched.next_batch(16)            # list[Task], deterministic for seed + history
    sched.observe(groups)                   # list[list[Trajectory]], one inner list per task
    keep = sched.filter_groups(groups)      # False for zero-variance groups (no gradient)
    extra = sched.draw_count(16)            # prompts to draw so ~16 groups survive filtering

Sampling is stratified three ways: domains get exactly their mixture share of the batch
(largest-remainder allocation), difficulty buckets (quantiles of `task.difficulty`
within a domain) get draws in proportion to the policy's weight mass, and tasks within
a bucket are drawn without replacement in proportion to their weight. Tasks drawn but
not yet observed are held out of later draws (no duplicate groups within a step, none
while a long task is still in flight) until observed or `pending_ttl` draws pass.

A "step" here is one `observe()` call; `last_step` and revisits count in those units.

With `curriculum={...}` (curriculum.py) each listed domain is drawn only at its current
difficulty level, which moves with the domain's observed pass rate; its state is in
`state_dict()`. With `domain_shares="signal"` (domain_shares.py) each prompt slot goes to a
domain by Thompson sampling on its rate of groups with signal, not by the fixed mixture.

Does not: run rollouts, look at durations (see `longtail.py`), or persist itself; the
training loop saves `state_dict()` with its checkpoint.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Mapping, Sequence

import numpy as np

import posttrain.schedule.policies  # noqa: F401  (registers the built-in policies)
from posttrain.schedule.fixed_order import KEY as ORDER_KEY, check_order, load_order
from posttrain.errors import ConfigError
from posttrain.registry import registry
from posttrain.schedule.curriculum import Curriculum
from posttrain.schedule.domain_shares import MODES as SHARE_MODES, SignalShares
from posttrain.schedule.filtering import has_signal, is_scored
from posttrain.schedule.sampling import allocate, pick
from posttrain.schedule.stats import PassStats, difficulty_buckets
from posttrain.types import Task, Trajectory, content_hash

STATE_VERSION = 1


def _normalise_mixture(domains: list[str], mixture: Mapping[str, float] | None) -> list[float]:
    if not mixture:
        return [1.0] * len(domains)
    for name, w in mixture.items():
        if name not in domains:
            raise ConfigError(f"mixture names domain {name!r}, but no task has it; domains: {', '.join(domains)}")
        if not (isinstance(w, (int, float)) and math.isfinite(w) and w >= 0):
            raise ConfigError(f"mixture weight for domain {name!r} must be a finite number >= 0, got {w!r}")
    missing = [d for d in domains if d not in mixture]
    if missing:
        raise ConfigError(f"mixture has no weight for domain {missing[0]!r} (tasks of that domain were given)")
    weights = [float(mixture[d]) for d in domains]
    if sum(weights) <= 0:
        raise ConfigError("mixture weights are all zero")
    return weights


class Scheduler:
    def __init__(self, tasks: Sequence[Task], mixture: Mapping[str, float] | None = None,
                 policy: str = "learning_signal", seed: int = 0, *, n_buckets: int = 3,
                 decay: float = 0.7, prior_strength: float = 2.0, pending_ttl: int = 4,
                 max_oversample: float = 4.0, curriculum: Mapping[str, Any] | None = None,
                 order_file: str | None = None, domain_shares: str = "mixture", **policy_args: Any) -> None:
        if not tasks:
            raise ConfigError("scheduler needs at least one task, got none")
        if not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"scheduler seed must be an integer >= 0, got {seed!r}")
        if n_buckets < 1 or not 0.0 <= decay <= 1.0 or prior_strength <= 0:
            raise ConfigError(f"scheduler: need n_buckets >= 1, 0 <= decay <= 1, prior_strength > 0; "
                              f"got {n_buckets}, {decay}, {prior_strength}")
        self.tasks = list(tasks)
        self.index: dict[str, int] = {}
        for i, t in enumerate(self.tasks):
            if t.id in self.index:
                raise ConfigError(f"duplicate task id {t.id!r} given to the scheduler")
            self.index[t.id] = i
        self.domains = sorted({t.domain for t in self.tasks})
        self.mixture = _normalise_mixture(self.domains, mixture)
        if domain_shares not in SHARE_MODES:
            raise ConfigError(f"schedule.domain_shares must be one of {', '.join(SHARE_MODES)}, got {domain_shares!r}")
        # "signal": shares follow each domain's rate of groups with signal (domain_shares.py); None: the mixture
        self.signal_shares = SignalShares(len(self.domains)) if domain_shares == "signal" else None
        dom_of = {d: k for k, d in enumerate(self.domains)}
        self.buckets = difficulty_buckets(self.tasks, n_buckets)
        self.stats = PassStats([dom_of[t.domain] for t in self.tasks], self.buckets, n_buckets,
                               decay=decay, prior_strength=prior_strength)
        self.policy_name, self.policy_args = policy, dict(policy_args)
        self._policy = registry("sched_policy").get(policy)
        self.seed, self.pending_ttl, self.max_oversample = seed, pending_ttl, max_oversample
        self.draws = 0  # next_batch calls so far: the per-draw RNG stream index
        self.step = 0  # observe calls so far
        self.pending: dict[str, int] = {}  # task id -> draw index it was handed out at
        self.keep_rate = 1.0  # EMA of the fraction of groups that survive filtering
        self._window = [0, 0]  # groups filtered, groups dropped since the last metrics()
        self._totals = [0, 0]
        self._pass: dict[str, float] = {}  # domain -> mean scored reward at its last observe
        self.fingerprint = content_hash([t.version for t in self.tasks])
        # Per-domain difficulty levels (curriculum.py): draws only from each domain's current level.
        self.curriculum = Curriculum(self.tasks, **curriculum) if curriculum is not None else None
        self._check_policy_args()
        self.order = self._fixed_order(order_file)

    def _fixed_order(self, order_file: str | None) -> list[list[str]] | None:
        """`schedule.name: fixed_order` replays `order_file` (schedule/fixed_order.py); None otherwise."""
        if (self.policy_name == "fixed_order") != (order_file is not None):
            raise ConfigError(f"schedule.name={self.policy_name!r} with {ORDER_KEY}={order_file!r}: the fixed_order "
                              "policy and an order file go together")
        if order_file is None:
            return None
        order = load_order(order_file)
        check_order(order, self.index, len(order[0]) if order else 0, 0)
        return order

    # -- weights ---------------------------------------------------------------------------
    def _check_policy_args(self) -> None:
        try:
            inspect.signature(self._policy).bind(None, 0, **self.policy_args)
        except TypeError as e:
            raise ConfigError(f"bad arguments for sched_policy {self.policy_name!r}: {e}") from None
        try:
            self.weights()
        except ValueError as e:
            raise ConfigError(f"bad arguments for sched_policy {self.policy_name!r}: {e}") from None

    def weights(self) -> np.ndarray:
        """[N] policy weights for the current statistics and step (not yet normalised)."""
        w = np.asarray(self._policy(self.stats.view(), self.step, **self.policy_args), dtype=float)
        if w.shape != (len(self.tasks),) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ConfigError(f"sched_policy {self.policy_name!r} must return {len(self.tasks)} finite "
                              f"weights >= 0, got shape {w.shape}")
        return w

    # -- sampling --------------------------------------------------------------------------
    def next_batch(self, n: int) -> list[Task]:
        """`n` tasks, stratified by domain and difficulty bucket; call again for replacements."""
        if not isinstance(n, int) or n < 0:
            raise ConfigError(f"next_batch needs a count >= 0, got {n!r}")
        self._expire_pending()
        if self.order is not None:
            return self._replay(n)
        rng = np.random.default_rng([self.seed, self.draws])  # same stream in every process
        self.draws += 1
        w = self.weights()
        for tid in self.pending:
            w[self.index[tid]] = 0.0  # in flight: no second group for it yet
        allowed = self.curriculum.allowed() if self.curriculum is not None else np.ones(len(self.tasks), dtype=bool)
        chosen: list[int] = []
        per_domain = allocate(n, self.mixture, rng) if self.signal_shares is None else \
            self.signal_shares.allocate(n, self.mixture, rng)  # [D] prompts per domain
        for d, count in enumerate(per_domain):
            if count == 0:
                continue
            rows = np.flatnonzero((self.stats.domain == d) & allowed)  # [N_d] at the domain's current level
            b_of = self.stats.bucket[rows]
            masses = [float(w[rows[b_of == b]].sum()) for b in range(self.stats.n_buckets)]
            if sum(masses) <= 0:  # everything retired or in flight: draw the domain uniformly
                masses = [float((b_of == b).sum()) for b in range(self.stats.n_buckets)]
            for b, c in enumerate(allocate(count, masses, rng)):
                members = rows[b_of == b]
                chosen.extend(int(members[j]) for j in pick(w[members], c, rng))
        chosen = [chosen[j] for j in rng.permutation(len(chosen))]  # interleave domains so a prefix of the batch is a fair sample
        for i in chosen:
            self.pending[self.tasks[i].id] = self.draws - 1
        return [self.tasks[i] for i in chosen]

    def _replay(self, n: int) -> list[Task]:
        """Line `draws` of the order file (schedule.name=fixed_order)."""
        if self.draws >= len(self.order or []):
            raise ConfigError(f"{ORDER_KEY}: the order file has {len(self.order or [])} steps; step {self.draws} was asked for")
        ids = self.order[self.draws]  # type: ignore[index]
        if len(ids) != n:
            raise ConfigError(f"{ORDER_KEY}: step {self.draws} names {len(ids)} tasks; {n} were asked for")
        self.draws += 1
        for tid in ids:
            self.pending[tid] = self.draws - 1
        return [self.tasks[self.index[tid]] for tid in ids]

    def domain_shares(self) -> list[float]:
        """[D] each domain's expected share of the next draw, unnormalised (self.domains order)."""
        if self.signal_shares is None:
            return list(self.mixture)
        return self.signal_shares.win_probability(self.mixture)

    def draw_count(self, n_needed: int) -> int:
        """Prompts to draw so that, at the recent keep rate, ~`n_needed` groups survive."""
        rate = max(self.keep_rate, 1.0 / self.max_oversample)
        return int(math.ceil(n_needed / rate)) if n_needed > 0 else 0

    def _expire_pending(self) -> None:
        old = [tid for tid, at in self.pending.items() if self.draws - at >= self.pending_ttl]
        for tid in old:
            del self.pending[tid]

    # -- feedback --------------------------------------------------------------------------
    def observe(self, groups: Sequence[Sequence[Trajectory]]) -> None:
        """Fold scored rewards into the statistics; infra errors and timeouts are skipped.

        A flat list of trajectories is accepted too (they are grouped by task id).
        """
        if groups and isinstance(groups[0], Trajectory):
            groups = [groups]  # type: ignore[list-item]
        sums: dict[str, list[float]] = {}
        for group in groups:
            by_task: dict[str, list[float]] = {}
            for t in group:
                rewards = by_task.setdefault(t.task_id, [])
                if is_scored(t):
                    rewards.append(float(t.reward))
            if self.signal_shares is not None and group:
                i = self.index.get(group[0].task_id)
                if i is not None and any(is_scored(t) for t in group):
                    self.signal_shares.observe(int(self.stats.domain[i]), has_signal(group))
            for tid, rewards in by_task.items():
                self.pending.pop(tid, None)
                i = self.index.get(tid)
                if i is None or not rewards:
                    continue
                self.stats.observe(i, rewards, self.step)
                sums.setdefault(self.tasks[i].domain, []).extend(rewards)
                if self.curriculum is not None:
                    self.curriculum.observe(self.tasks[i], rewards)
        for dom, rs in sums.items():
            self._pass[dom] = float(np.mean(rs))
        if self.curriculum is not None:
            for d in self.curriculum.update(self.step):
                if self.signal_shares is not None:  # a new level: the old level's signal rate says nothing
                    self.signal_shares.reset(self.domains.index(d))
        self.step += 1

    def filter_groups(self, groups: Sequence[Sequence[Trajectory]]) -> list[bool]:
        """One flag per group: True iff its scored rewards differ (DAPO dynamic sampling)."""
        keep = [has_signal(g) for g in groups]
        if keep:
            self.keep_rate = 0.7 * self.keep_rate + 0.3 * (sum(keep) / len(keep))
        dropped = len(keep) - sum(keep)
        self._window[0] += len(keep)
        self._window[1] += dropped
        self._totals[0] += len(keep)
        self._totals[1] += dropped
        return keep

    # -- visibility ------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """Flat metrics for this step; the dropped fraction covers filter calls since the last call."""
        w = self.weights()
        if self.curriculum is not None:
            w = w * self.curriculum.allowed()  # what the next draw can reach: the current levels only
        out: dict[str, float] = {}
        shares = self.domain_shares()
        total = sum(shares)
        for d, name in enumerate(self.domains):
            share = shares[d] / total
            out[f"sched/weight/{name}"] = share
            rows = self.stats.domain == d
            mass = float(w[rows].sum())
            for b in range(self.stats.n_buckets):
                in_b = rows & (self.stats.bucket == b)
                if in_b.any():
                    frac = float(w[in_b].sum()) / mass if mass > 0 else float(in_b.sum()) / float(rows.sum())
                    out[f"sched/weight/{name}/bucket{b}"] = share * frac
            if name in self._pass:
                out[f"sched/pass_rate/{name}"] = self._pass[name]
            out[f"sched/posterior_pass/{name}"] = float(self.stats.view().mean[rows].mean())
        seen, dropped = self._window
        out["sched/dropped_frac"] = dropped / seen if seen else 0.0
        out["sched/dropped_frac_total"] = self._totals[1] / self._totals[0] if self._totals[0] else 0.0
        out["sched/keep_rate_ema"] = self.keep_rate
        out["sched/zero_weight_frac"] = float(np.mean(w == 0))
        out["sched/coverage"] = float(np.mean(self.stats.attempts > 0))
        out["sched/pending"] = float(len(self.pending))
        if self.curriculum is not None:
            out.update(self.curriculum.metrics())
        self._window = [0, 0]
        return out

    # -- resume ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION, "fingerprint": self.fingerprint, "policy": self.policy_name,
            "seed": self.seed, "draws": self.draws, "step": self.step,
            "pending": dict(self.pending), "keep_rate": self.keep_rate,
            "window": list(self._window), "totals": list(self._totals), "pass": dict(self._pass),
            "stats": self.stats.state_dict(),
            "curriculum": self.curriculum.state_dict() if self.curriculum is not None else None,
            "domain_shares": self.signal_shares.state_dict() if self.signal_shares is not None else None,
        }

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        if d.get("version") != STATE_VERSION:
            raise ConfigError(f"scheduler state version {d.get('version')!r} is not {STATE_VERSION}")
        if d.get("fingerprint") != self.fingerprint:
            raise ConfigError("scheduler state was saved for a different task set (fingerprint mismatch)")
        unknown = [tid for tid in d["pending"] if tid not in self.index]
        if unknown:
            raise ConfigError(f"scheduler state names unknown pending task {unknown[0]!r}")
        self.stats.load_state_dict(d["stats"])
        self.seed, self.draws, self.step = int(d["seed"]), int(d["draws"]), int(d["step"])
        self.pending = {str(k): int(v) for k, v in d["pending"].items()}
        self.keep_rate = float(d["keep_rate"])
        self._window, self._totals = list(d["window"]), list(d["totals"])
        self._pass = {str(k): float(v) for k, v in d["pass"].items()}
        if (d.get("curriculum") is None) != (self.curriculum is None):
            raise ConfigError("scheduler state and this run disagree on schedule.curriculum (one has it, one not)")
        if self.curriculum is not None:
            self.curriculum.load_state_dict(d["curriculum"])
        if (d.get("domain_shares") is None) != (self.signal_shares is None):  # absent: saved before the key
            raise ConfigError("scheduler state and this run disagree on schedule.domain_shares (signal in one only)")
        if self.signal_shares is not None:
            self.signal_shares.load_state_dict(d["domain_shares"])
