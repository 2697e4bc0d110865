"""The one split builder: train, held-out and SFT-demonstration tasks from a run config,
pinned in the run directory so replay, postmortem and eval read the exact tasks back.

    splits = make_splits(cfg)                  # text domains
    splits = make_splits(cfg, images=True)     # image domains: a (question, image) pair never repeats
    pin_splits(splits, run_dir)                # run_dir/tasks/{train,heldout,sft}.jsonl
    splits = load_pinned(run_dir)              # None when the run pinned nothing

Text: the held-out split is drawn first, from its own seed (`tasks.eval_seed + seed`), and
training tasks avoid every held-out prompt. Images: training tasks are drawn first and the
held-out split skips any (question, image) pair the training set holds, since image
generators repeat questions over different pictures. `tasks.sft_frac` of each domain's
tasks with an oracle answer become the SFT warm-up's demonstrations; RL samples the rest.
With `schedule.curriculum`, a followed text domain's training tasks are pooled at every level,
each id tagged with its level (`arithmetic-0-3@L2`, `level_task`); other ids stay the domain's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from posttrain.errors import ConfigError
from posttrain.types import Task

PINNED = ("train", "heldout", "sft")


@dataclass
class Splits:
    train: list[Task]
    held_out: list[Task]
    sft: list[Task] = field(default_factory=list)  # oracle demonstrations for the warm-up
    dropped: dict[str, int] = field(default_factory=dict)  # train task id -> prompt tokens, over rl.max_prompt_tokens

    @property
    def rl(self) -> list[Task]:
        ids = {t.id for t in self.sft}
        return [t for t in self.train if t.id not in ids] or self.train


def _image_key(t: Task) -> tuple:
    return (t.prompt[-1].content, tuple(a.sha256 for m in t.prompt for a in m.attachments))


def _text_splits(cfg: Any) -> tuple[list[Task], list[Task]]:
    from posttrain.registry import build
    from posttrain.tasks.base import generate_split, question_key

    train, held = [], []
    for name, d in cfg.tasks.domains.items():
        dom = build(name, kind="domain", **d.args)
        ho = generate_split(dom, d.n_eval, cfg.tasks.eval_seed + cfg.seed, d.difficulty)
        held += ho
        if d.held_out:  # a held-out domain: never trained on, evaluated apart (transfer)
            continue
        seen = {question_key(t) for t in ho}
        levels = train_levels(cfg, name)
        pools = []
        for level, n in levels:
            part = generate_split(dom, n, cfg.seed, level, exclude=seen)
            seen |= {question_key(t) for t in part}
            pools.append((level, part if len(levels) == 1 else [level_task(t, level) for t in part]))
        check_level_pools(name, pools)
        if not any(part for _, part in pools) and d.n_train > 0:
            raise ConfigError(f"tasks.domains.{name}: no training task left: the domain made {len(ho)} for the held-out "
                              f"split (n_eval={d.n_eval}) and no other (a small fixed set such as τ²'s mock); lower n_eval")
        train += [t for _, part in pools for t in part]
    return train, held


def level_task(task: Task, level: float) -> Task:
    """A task of a pool generated at several difficulty levels, its id tagged with the level it was
    generated at (`arithmetic-0-3@L2`). Domains number tasks by (seed, index), not by difficulty, so the
    pools' ids would repeat; a single-level domain's ids stay as the domain makes them (pinned suites
    and regression sets name them)."""
    import dataclasses

    return dataclasses.replace(task, id=f"{task.id}@L{level:g}")


def check_level_pools(name: str, pools: list[tuple[float, list[Task]]]) -> None:
    """The curriculum tells levels apart by `task.difficulty`; a domain that clamps, rounds or mixes its
    difficulty (math stops at 3, conflict rounds, rg-* draws level 1.5 from 1 and 2) can give two
    configured levels tasks of one difficulty, which would merge their pools. A one-line ConfigError
    naming the domain and the levels."""
    made: dict[float, float] = {}
    for level, part in pools:
        for d in sorted({float(t.difficulty) for t in part}):
            if made.setdefault(d, level) != level:
                raise ConfigError(f"schedule.curriculum.levels: domain {name!r} makes tasks of difficulty {d:g} at "
                                  f"levels {made[d]:g} and {level:g} (clamped to its range, rounded, or a fractional "
                                  "level mixing its neighbours); choose levels the domain tells apart")


def train_levels(cfg: Any, name: str) -> list[tuple[float, int]]:
    """(difficulty, count) pools of domain `name`'s training tasks: its own difficulty, or with a
    curriculum that follows it (`schedule.curriculum`) n_train split evenly over the curriculum's levels."""
    d, cur = cfg.tasks.domains[name], cfg.schedule.curriculum
    if cur is None or name in cur.exclude or (cur.domains is not None and name not in cur.domains):
        return [(d.difficulty, d.n_train)]
    k = len(cur.levels)
    return [(float(lv), d.n_train // k + (i < d.n_train % k)) for i, lv in enumerate(cur.levels)]


def held_out_domains(cfg: Any) -> list[str]:
    """The domains a run never trains on (`tasks.domains.X.held_out`), whose eval measures transfer."""
    return [n for n, d in cfg.tasks.domains.items() if d.held_out]


def _image_splits(cfg: Any) -> tuple[list[Task], list[Task]]:
    from posttrain.registry import build

    train, held = [], []
    for name, d in cfg.tasks.domains.items():
        dom = build(name, kind="domain", **d.args)
        tr = dom.generate(d.n_train, cfg.seed, d.difficulty)
        seen = {_image_key(t) for t in tr}
        ev = [t for t in dom.generate(d.n_eval * 2, cfg.tasks.eval_seed + cfg.seed, d.difficulty)
              if _image_key(t) not in seen]
        train += tr
        held += ev[: d.n_eval]
    return train, held


def sft_demos(train: list[Task], frac: float) -> list[Task]:
    """The first `frac` of each domain's tasks that have an oracle answer (not a simulated user's task:
    its oracle is the plan a replay runs, not a reply to train on)."""
    demos = [t for t in train if t.oracle is not None and "user_scenario" not in t.metadata]
    cut = {d: round(frac * sum(t.domain == d for t in demos)) for d in {t.domain for t in demos}}
    out = []
    for t in demos:
        if cut[t.domain] > 0:
            out.append(t)
            cut[t.domain] -= 1
    return out


def check_unique_ids(groups: Iterable[tuple[str, Iterable[Task]]]) -> None:
    """ConfigError naming repeated task ids and the sources that share them: results, pinned
    splits and the scheduler key tasks by id, so a repeat would merge two tasks' records."""
    first: dict[str, str] = {}
    dups: list[str] = []
    for source, tasks in groups:
        for t in tasks:
            if t.id in first:
                dups.append(f"{t.id!r} ({first[t.id]} and {source})")
            else:
                first[t.id] = source
    if dups:
        more = f" and {len(dups) - 3} more" if len(dups) > 3 else ""
        raise ConfigError(f"tasks: task ids must be unique across domains and tasks.files; repeated: "
                          f"{', '.join(dups[:3])}{more}")


def _by_domain(tasks: list[Task], split: str) -> list[tuple[str, list[Task]]]:
    groups: dict[str, list[Task]] = {}
    for t in tasks:
        groups.setdefault(f"domain {t.domain!r} {split}", []).append(t)
    return list(groups.items())


def file_tasks(cfg: Any, paths: Iterable[str]) -> list[tuple[str, list[Task]]]:
    """The tasks of each file, with `tasks.answer_format` as the format rule of those naming none."""
    import dataclasses

    from posttrain.tasks.io import load_tasks

    fmt = cfg.tasks.answer_format
    out = []
    for f in paths:
        tasks = load_tasks(f)
        if fmt is not None:
            tasks = [t if "answer_format" in t.metadata else
                     dataclasses.replace(t, metadata={**t.metadata, "answer_format": fmt}) for t in tasks]
        out.append((str(f), tasks))
    return out


_LAST: dict[str, Splits] = {}  # the last splits built, by what they depend on


def make_splits(cfg: Any, images: bool = False) -> Splits:
    """Train / held-out / SFT splits of every configured domain, plus `tasks.files` (train) and
    `tasks.heldout_files` (held-out). `tasks.sft_frac` applies only when an SFT warm-up runs
    (`sft.steps` > 0): without one, every training task is RL's. The last result is kept, so the
    config check that needs the splits (config_check.check_rl_splits) and the run share one build
    (3,000 generated code tasks take seconds); each call gets its own lists."""
    import json

    files = [(f, p.stat().st_mtime_ns, p.stat().st_size) for f in [*cfg.tasks.files, *cfg.tasks.heldout_files]
             if (p := Path(f)).is_file()]  # a rewritten task file is read again
    cur = cfg.schedule.curriculum  # its levels shape the training pool (train_levels)
    key = json.dumps([cfg.tasks.model_dump(), cfg.seed, cfg.sft.steps, images, files,
                      None if cur is None else cur.model_dump()], sort_keys=True, default=str)
    if key not in _LAST:
        _LAST.clear()
        _LAST[key] = _make_splits(cfg, images)
    sp = _LAST[key]
    return Splits(list(sp.train), list(sp.held_out), list(sp.sft), dict(sp.dropped))


def _make_splits(cfg: Any, images: bool) -> Splits:
    train, held = _image_splits(cfg) if images else _text_splits(cfg)
    files = file_tasks(cfg, cfg.tasks.files)  # user task files train alongside the domains
    held_files = file_tasks(cfg, cfg.tasks.heldout_files)  # a fixed held-out split, from files
    check_unique_ids([*_by_domain(train, "train"), *_by_domain(held, "held-out"), *files,
                      *((f"held-out file {f}", ts) for f, ts in held_files)])
    for _, tasks in files:
        train += tasks
    for _, tasks in held_files:
        held += tasks
    return Splits(train, held, sft_demos(train, cfg.tasks.sft_frac if cfg.sft.steps > 0 else 0.0))


def pin_splits(splits: Splits, run_dir: Path) -> None:
    """Pin the exact tasks of the run (replay, postmortem and eval rebuild them from here)."""
    from posttrain.tasks.io import save_tasks

    d = Path(run_dir) / "tasks"
    d.mkdir(parents=True, exist_ok=True)
    for name, tasks in zip(PINNED, (splits.train, splits.held_out, splits.sft)):
        save_tasks(tasks, d / f"{name}.jsonl")


def load_pinned(run_dir: Path) -> Splits | None:
    """The pinned splits of a run directory, or None if it pinned none (an older run)."""
    from posttrain.tasks.io import load_tasks

    d = Path(run_dir) / "tasks"
    if not (d / "train.jsonl").is_file() or not (d / "heldout.jsonl").is_file():
        return None
    sft = load_tasks(d / "sft.jsonl", allow_empty=True) if (d / "sft.jsonl").is_file() else []
    return Splits(load_tasks(d / "train.jsonl", allow_empty=True), load_tasks(d / "heldout.jsonl", allow_empty=True), sft)
