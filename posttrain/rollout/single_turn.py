"""Single-turn rollout: one generation per sample, turned into `Trajectory` records."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Sequence

from posttrain.rollout.engine import Completion, Engine, GenRequest, SamplingParams, oldest_version
from posttrain.types import Task, Trajectory, TrajError, Turn


async def rollout_single_turn(engine: Engine, tokenizer: Any, tasks: Sequence[Task], params: SamplingParams,
                              step: int = 0) -> list[Trajectory]:
    """`params.n` samples per task, request-major: trajs[g * n + k] is task g, sample k."""
    from posttrain.rollout.vision import encode_task_prompt, engine_model_label

    label = engine_model_label(engine)
    vps = [encode_task_prompt(tokenizer, t, label) for t in tasks]  # text tasks: plain encode_prompt
    prompts = [vp.ids for vp in vps]
    reqs = []
    for g, (t, ids) in enumerate(zip(tasks, prompts)):
        p = dataclasses.replace(params, max_new_tokens=min(params.max_new_tokens, t.limits.max_new_tokens))
        if params.seed is not None:  # one stream per request: a shared seed would give every prompt's
            # k-th sample the same random draws, correlating the whole batch (8 samples, not 8 x G)
            p = dataclasses.replace(p, seed=(params.seed * 1_000_003 + g) % (2**31 - 1))
        if not vps[g].error:  # a task whose prompt failed (bad image, text-only model) gets error completions below
            reqs.append(GenRequest(ids, p, id=f"{step}:{g}:{t.id}", images=vps[g].images))
    t0 = time.perf_counter()
    v0 = engine.weights_version  # before the call: an in-flight update (rl.partial_rollouts) may move it
    outs = engine.generate(reqs) if reqs else []
    outs += [Completion(f"{step}:{g}:{t.id}", k, (), (), "", "error", vps[g].error)
             for g, t in enumerate(tasks) if vps[g].error for k in range(params.n)]
    outs.sort(key=lambda c: int(c.request_id.split(":", 2)[1]))  # stable: keeps request-major order
    gen_s = (time.perf_counter() - t0) / max(1, len(outs))
    trajs = []
    for c in outs:
        g = int(c.request_id.split(":", 2)[1])
        task = tasks[g]
        err = TrajError("engine", c.error) if c.finish_reason == "error" else None
        turn = Turn("assistant", c.text, c.token_ids, c.logprobs, trainable=True, token_versions=c.token_versions)
        trajs.append(Trajectory(
            task_id=task.id, task_version=task.version, domain=task.domain, prompt_ids=prompts[g],
            turns=(turn,), weights_version=oldest_version(c, v0), step=step, group=g, sample=c.index,
            finish_reason=c.finish_reason, timings={"generate_s": gen_s}, error=err,
        ))
    return trajs
