"""Run a suite against a model: generate, verify, record every sample, resume where it stopped.

    ref = resolve_model("runs/rl-1")
    result = asyncio.run(evaluate(ref, load_suite("regression"), Path("runs/eval-x"), EvalOptions(epochs=5)))

Pipeline: pending (task, epoch) samples are cut into generation batches of at most
`generation` samples (one engine call each, on a worker thread so the event loop keeps
verifying); each generated batch is verified with at most `sandboxes` verifier calls in
flight, and its records are appended and fsync'd before the batch counts as done. So an
interrupted run loses at most the batches in flight, and a rerun with the same `--out`
redoes only samples without a record. Generations are cached by (model hash, prompt,
sampling, seed, epoch) across runs.

Timing: wall time is split into engine startup (importing torch/transformers, loading the
weights, building the engine: the cost of generation with any harness), generation
(engine calls), verification (verifier calls) and harness overhead = wall minus startup
minus the union of generation and verification intervals (planning, prompt encoding,
the cache, bookkeeping, writing and fsyncing records, the summary).

Multi-step tasks (types.is_multi_step: terminal, tools, scene) run as agent episodes through the
same rollout entry training uses (`episodes.py`), after the single-turn batches, one engine call per
step across the episodes of a batch; each episode's verdict comes from its own final state,
so its span counts as generation (verification happens inside it). A cached multi-step
sample is replayed: its recorded turns re-run against a fresh sandbox and are re-verified,
without calling the model. Image tasks (chart, drawing, ui) need a vision-language model
directory; their cache key includes the images' bytes, since the prompt ids alone are the
same for every image.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from posttrain.eval.cache import GenerationCache, cache_key
from posttrain.eval.core import run_scored, verdict
from posttrain.eval.modelref import ModelRef
from posttrain.eval.records import (META_FILE, SAMPLES_FILE, SUMMARY_FILE, EvalError, RecordFile, SampleRecord,
                                    read_json, sample_key, write_json_atomic)
from posttrain.eval.sizing import limit_suite
from posttrain.eval.suite import Suite
from posttrain.eval.summary import summarize
from posttrain.eval.trajio import trajectory_to_dict
from posttrain.types import Task, Trajectory, TrajError, content_hash, is_multi_step


@dataclass
class EvalOptions:
    epochs: int | None = None  # None -> the suite's
    temperature: float | None = None  # None -> the suite's
    engine: str = "auto"  # "auto" -> "fast" when registered, else the reference "hf"
    generation: int | None = None  # max samples per engine call; None -> suite, else 256
    sandboxes: int | None = None  # max verifier calls in flight; None -> suite, else 2
    cache: Path | None = None  # generation cache file; None disables it
    retries: int = 2  # verifier infra-error retries
    progress: Callable[[int, int], None] | None = None  # (done, total) of this segment; (0, total) at its start
    limit: int | None = None  # a seeded, domain-stratified sample of this many tasks (sizing.py)
    limit_seed: int = 0
    first_batch: int = 4  # the first generation batch is this small, so a time estimate comes early


@dataclass
class Timer:
    """Busy intervals of generation and verification, for the overhead split."""

    gen: list[tuple[float, float]] = field(default_factory=list)
    verify: list[tuple[float, float]] = field(default_factory=list)

    @staticmethod
    def union(spans: Sequence[tuple[float, float]]) -> float:
        total, end = 0.0, float("-inf")
        for s, e in sorted(spans):
            if e > end:
                total += e - max(s, end)
                end = e
        return total


def sampling_of(suite: Suite, opts: EvalOptions) -> dict[str, Any]:
    s = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 32, **suite.sampling}
    if opts.temperature is not None:
        s["temperature"] = opts.temperature
    return s


def _sample_seed(suite_seed: int, epoch: int) -> int:
    return int(hashlib.sha256(f"{suite_seed}:{epoch}".encode()).hexdigest()[:8], 16)


def _open_run(out: Path, suite: Suite, ref: ModelRef, sampling: dict[str, Any], engine: str) -> dict[str, Any]:
    """Write meta.json, or check that an existing run is the same model, tasks and sampling."""
    identity = {"model_hash": ref.hash, "tasks_hash": content_hash(sorted(t.version for t in suite.tasks)),
                "sampling": sampling, "suite_seed": suite.seed}
    meta = {"suite": suite.name, "suite_path": str(suite.path), "model": str(ref.path),
            "source_run": str(ref.source_run) if ref.source_run else None, "engine": engine, **identity}
    path = out / META_FILE
    if path.exists():
        old = read_json(path, "run metadata")
        diff = [k for k in identity if old.get(k) != identity[k]]
        if diff:
            raise EvalError(f"{out} holds an evaluation with a different {', '.join(diff)}; "
                            f"use a new --out to evaluate this model/suite (or --overwrite to replace that evaluation)")
        return {**old, **meta}
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {**meta, "created": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return meta


def _tokens(traj: Trajectory) -> int:
    return sum(len(t.token_ids) for t in traj.turns if t.role == "assistant")


def to_record(task: Task, epoch: int, seed: int, traj: Trajectory, verify_s: float, cached: bool) -> SampleRecord:
    v, judged = traj.verify, verdict(traj)  # eval/core.py: the held-out eval's rule too
    gen_s = 0.0 if cached else float(traj.timings.get("generate_s", 0.0))
    return SampleRecord(
        task_id=task.id, task_version=task.version, domain=task.domain, epoch=epoch, seed=seed,
        prompt="\n".join(f"{m.role}: {m.content}" for m in task.prompt), completion=traj.completion_text,
        score=judged.score, passed=judged.passed, status="infra_error" if judged.infra else "ok",
        details=_plain(v.details) if v else {},
        reason=v.reason if v else "", steps=traj.num_steps, tokens=_tokens(traj),
        wall_s=gen_s + verify_s, gen_s=gen_s, verify_s=verify_s,
        error={"boundary": traj.error.boundary, "message": traj.error.message} if traj.error else None,
        cached=cached, trajectory=trajectory_to_dict(traj))


def _plain(x: Any) -> Any:
    """Verifier details as plain JSON types (agent details hold read-only mappings and tuples)."""
    from collections.abc import Mapping

    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


@dataclass
class _Job:
    task: Task
    epoch: int
    seed: int
    key: str  # generation-cache key
    prompt_ids: tuple[int, ...] = ()


class _Run:
    """One evaluation's moving parts: engine, verifier runner, record file, cache, timers."""

    def __init__(self, engine: Any, tok: Any, verifier: Any, records: RecordFile, cache: GenerationCache | None,
                 sampling: dict[str, Any], total: int, progress: Callable[[int, int], None] | None) -> None:
        self.engine, self.tok, self.verifier, self.records, self.cache = engine, tok, verifier, records, cache
        self.sampling, self.total, self.progress = sampling, total, progress
        self.timer = Timer()
        self.done = 0

    async def episodes(self, jobs: list[_Job], cached: dict[str, Trajectory], concurrency: int) -> None:
        """Multi-step jobs of one epoch: live episodes, or replays of cached ones; then record them."""
        from posttrain.eval.episodes import replay_episodes, run_episodes

        sandbox = self.verifier.ctx.sandbox
        t0 = time.perf_counter()
        hits, live = [j for j in jobs if j.key in cached], [j for j in jobs if j.key not in cached]
        out: list[tuple[_Job, Trajectory, bool]] = []
        try:
            if hits:
                trajs = await replay_episodes(self.tok, [j.task for j in hits], [cached[j.key] for j in hits],
                                              sandbox, self.verifier, concurrency)
                out += [(j, t, True) for j, t in zip(hits, trajs)]
            if live:
                trajs = await run_episodes(self.engine, self.tok, [j.task for j in live], self.sampling, live[0].seed,
                                           sandbox, self.verifier, concurrency)
                out += [(j, t, False) for j, t in zip(live, trajs)]
        except Exception as e:  # noqa: BLE001  the loop itself failed: every sample of the batch records it
            done = {id(j) for j, _, _ in out}
            out += [(j, _failed(j.task, "engine", f"{type(e).__name__}: {e}"), False) for j in jobs if id(j) not in done]
        self.timer.gen.append((t0, time.perf_counter()))
        if self.cache is not None:
            self.cache.put_many((j.key, t) for j, t, hit in out if not hit and not t.infra_error)
        recs = [to_record(j.task, j.epoch, j.seed, dataclasses.replace(t, sample=j.epoch),
                          float(t.timings.get("verify_s", 0.0)), hit) for j, t, hit in out]
        self.records.append(recs)
        self.done += len(recs)
        if self.progress:
            self.progress(self.done, self.total)

    async def rollout(self, jobs: list[_Job], generated: asyncio.Event) -> None:
        """One-step jobs through the rollout entry (eval/core.run_scored): generation on a worker
        thread, then verification on this loop; `generated` is set when generation is over, so the
        pipeline starts the next batch while this one is verified. Then record them."""
        from posttrain.rollout.engine import SamplingParams
        from posttrain.rollout.entry import RolloutOptions

        seed = int(hashlib.sha256("".join(j.key for j in jobs).encode()).hexdigest()[:8], 16)
        opts = RolloutOptions(SamplingParams(**self.sampling, seed=seed, n=1), offload_generation=True)
        t0 = time.perf_counter()
        marks: list[float] = []

        def on_generated(raw: list[Trajectory]) -> None:
            marks.append(time.perf_counter())
            self.timer.gen.append((t0, marks[0]))
            if self.cache is not None:
                self.cache.put_many((j.key, t) for j, t in zip(jobs, raw) if t.error is None)
            generated.set()

        try:
            trajs = await run_scored(self.engine, self.tok, [j.task for j in jobs], opts, self.verifier,
                                     on_generated=on_generated)
        except Exception as e:  # one bad batch is data, not a crash: every sample records it
            if not marks:
                on_generated([])
            failed = [_failed(j.task, "engine", f"{type(e).__name__}: {e}") for j in jobs]
            trajs = [await self.verifier.verify_one(j.task, t) for j, t in zip(jobs, failed)]
        finally:
            generated.set()
        self.timer.verify.append((marks[0], time.perf_counter()))
        self._record(jobs, trajs, cached=False)

    def _record(self, jobs: list[_Job], trajs: list[Trajectory], cached: bool) -> None:
        recs = [to_record(j.task, j.epoch, j.seed, dataclasses.replace(t, sample=j.epoch),
                          float(t.timings.get("verify_s", 0.0)), cached) for j, t in zip(jobs, trajs)]
        self.records.append(recs)
        self.done += len(recs)
        if self.progress:
            self.progress(self.done, self.total)

    async def verify_and_record(self, jobs: list[_Job], trajs: list[Trajectory], cached: bool) -> None:
        """Score cached one-step generations with today's verifier (no model call), then record them."""
        t0 = time.perf_counter()
        done = await self.verifier.verify_all({j.task.id: j.task for j in jobs}, trajs)
        self.timer.verify.append((t0, time.perf_counter()))
        self._record(jobs, done, cached)


def _failed(task: Task, boundary: str, message: str) -> Trajectory:
    return Trajectory(task.id, task.version, task.domain, (), (), error=TrajError(boundary, message))  # type: ignore[arg-type]


def _keyed_sampling(task: Task, sampling: dict[str, Any]) -> dict[str, Any]:
    """The sampling part of a cache key, plus what else decides the generation beyond the prompt
    ids: for image tasks the images' sha256 (checked against their bytes on load), since their
    prompt ids are the same whatever the picture; for multi-step tasks the environment the tools
    answer from (files, tools, metadata, limits), since two tasks can share a prompt."""
    from posttrain.tasks.images import task_images

    out = dict(sampling)
    shas = [a.sha256 for a in task_images(task)]
    if shas:
        out["images"] = shas
    if is_multi_step(task):
        out["environment"] = content_hash({"environment": task.environment, "metadata": task.metadata,
                                           "limits": task.limits})
        # the prompt ids above are the task's own; the episode's also show its tools this way
        out["tools_prompt"] = out.get("tools_prompt", "auto")
    return out


def _plan(suite: Suite, epochs: int, done: dict[str, SampleRecord]) -> list[_Job]:
    """The samples still to run. A record whose verdict was an infrastructure error is redone,
    never reused: the cause (a missing --plugin, a dead sandbox) is usually fixed by the rerun."""
    from posttrain.eval.records import sample_key

    done = {k: r for k, r in done.items() if not r.infra_error}

    return [_Job(t, e, _sample_seed(suite.seed, e), "") for e in range(epochs) for t in suite.tasks
            if sample_key(t.id, t.version, e) not in done]


def _chunks(todo: list[_Job], batch: int, first: int) -> list[list[_Job]]:
    """Generation batches: a small first one (its time is the estimate users see early), then `batch` each."""
    first = max(1, min(batch, first))
    return [todo[:first]] + [todo[i:i + batch] for i in range(first, len(todo), batch)] if todo else []


async def _pipeline(run: _Run, jobs: list[_Job], cached: dict[str, Trajectory], batch: int, first: int) -> None:
    """Generate batch i+1 on a thread while batch i is verified; at most 2 batches wait."""
    inflight: set[asyncio.Task[None]] = set()

    async def drain(limit: int) -> None:
        nonlocal inflight
        while len(inflight) > limit:
            finished, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
            for f in finished:
                f.result()  # a failure to write records is fatal: re-raise it

    single = [j for j in jobs if not is_multi_step(j.task)]
    hits = [j for j in single if j.key in cached]
    if hits:
        inflight.add(asyncio.create_task(run.verify_and_record(hits, [cached[j.key] for j in hits], True)))
    todo = [j for j in single if j.key not in cached]
    for chunk in _chunks(todo, batch, first):
        generated = asyncio.Event()
        inflight.add(asyncio.create_task(run.rollout(chunk, generated)))
        await generated.wait()  # the engine is free: the next batch may generate while this one verifies
        await drain(2)
    await drain(0)
    # Multi-step episodes use the engine from this loop: only after single-turn generation is done.
    by_epoch: dict[int, list[_Job]] = {}
    for j in jobs:
        if is_multi_step(j.task):
            by_epoch.setdefault(j.epoch, []).append(j)
    for epoch_jobs in by_epoch.values():
        for i in range(0, len(epoch_jobs), batch):
            await run.episodes(epoch_jobs[i:i + batch], cached, batch)


def _earlier_wall(out: Path) -> dict[str, Any]:
    """Wall time and segment count of the earlier segments of a resumed run (its last summary.json)."""
    path = out / SUMMARY_FILE
    if not path.is_file():
        return {"total_wall_s": 0.0, "segments": 0}
    t = read_json(path, "summary").get("timing", {})
    return {"total_wall_s": float(t.get("total_wall_s", t.get("wall_s", 0.0))), "segments": int(t.get("segments", 1))}


def _build(ref: ModelRef, engine: str, batch: int) -> tuple[Any, Any]:
    from posttrain.models import load_policy
    from posttrain.models.vlm import is_vision_dir, load_vlm
    from posttrain.registry import registry
    from posttrain.rollout import make_engine

    vision = is_vision_dir(ref.path)
    if engine == "auto":  # the fast engine is text-only (llama/qwen2/mistral); image models take hf's generate
        engine = "fast" if "fast" in registry("engine").names() and not vision else "hf"
    # the generation concurrency, to the engines that batch by it (vllm schedules its own batches)
    extra = {"max_batch": batch} if registry("engine").props(engine)["max_batch_arg"] else {}
    model, tok = load_vlm(ref.path) if vision else load_policy(ref.path)
    return make_engine(engine, model, tok, **extra), tok


async def evaluate(ref: ModelRef, suite: Suite, out: Path, opts: EvalOptions, sandbox: Any = None) -> dict[str, Any]:
    """Run (or resume) `suite` on `ref` into `out`; returns the summary written to summary.json."""
    from posttrain.verifiers.run import VerifierRunner

    t_start = time.perf_counter()
    epochs = opts.epochs or suite.epochs
    if epochs < 1:
        raise EvalError(f"--epochs must be >= 1, got {epochs}")
    sampling = sampling_of(suite, opts)
    batch = max(1, opts.generation or suite.concurrency.get("generation", 256))
    sandboxes = max(1, opts.sandboxes or suite.concurrency.get("sandboxes", 2))
    suite = limit_suite(suite, opts.limit, opts.limit_seed)
    meta = _open_run(out, suite, ref, sampling, opts.engine)
    records = RecordFile(out / SAMPLES_FILE)
    earlier = _earlier_wall(out)
    jobs = _plan(suite, epochs, records.load())
    resumed = epochs * len(suite.tasks) - len(jobs)
    timer, cache_stats, startup = Timer(), {"hits": 0, "misses": 0}, 0.0
    if jobs:
        t0 = time.perf_counter()  # importing posttrain.rollout pulls in torch: engine startup
        from posttrain.rollout.prompting import encode_prompt

        engine, tok = _build(ref, opts.engine, batch)
        startup = time.perf_counter() - t0
        for j in jobs:
            j.prompt_ids = encode_prompt(tok, j.task.prompt)
            j.key = cache_key(ref.hash, j.prompt_ids, _keyed_sampling(j.task, sampling), j.seed, j.epoch)
        cache = GenerationCache(opts.cache) if opts.cache else None
        cached = cache.get_many([j.key for j in jobs]) if cache else {}
        verifier = VerifierRunner(sandbox, concurrency=sandboxes, retries=opts.retries)
        run = _Run(engine, tok, verifier, records, cache, sampling, len(jobs), opts.progress)
        if opts.progress:
            opts.progress(0, len(jobs))  # the clock of the estimate starts after the engine is up
        try:
            await _pipeline(run, jobs, cached, batch, opts.first_batch)
        finally:
            if cache:
                cache_stats = {"hits": cache.hits, "misses": cache.misses}
                cache.close()
        timer = run.timer
    keys = {sample_key(t.id, t.version, e) for e in range(epochs) for t in suite.tasks}
    summary = summarize([r for k, r in records.load().items() if k in keys], epochs)
    wall = time.perf_counter() - t_start
    busy = Timer.union(timer.gen + timer.verify)
    summary["run"] = {**meta, "epochs": epochs, "samples_new": len(jobs), "samples_resumed": resumed,
                      "limit": opts.limit, "limit_seed": opts.limit_seed if opts.limit else None,
                      "cache": cache_stats, "concurrency": {"generation": batch, "sandboxes": sandboxes}}
    harness = wall - busy - startup
    summary["timing"] = {"wall_s": wall, "total_wall_s": earlier["total_wall_s"] + wall,
                         "segments": earlier["segments"] + 1,
                         "engine_startup_s": startup, "generation_s": Timer.union(timer.gen),
                         "verification_s": Timer.union(timer.verify), "harness_s": harness,
                         "harness_frac": harness / wall if wall > 0 else 0.0}
    write_json_atomic(out / SUMMARY_FILE, summary)
    return summary
