"""Multi-step tasks in an evaluation: live agent episodes, and replays of recorded ones.

    trajs = await run_episodes(engine, tok, tasks, sampling, seed, sandbox, verifier, concurrency)
    trajs = await replay_episodes(tok, tasks, recorded, sandbox, verifier)   # no model involved

A multi-step sample is generation *and* environment: observations come from tools and the
task's sandbox session, and a terminal task's verdict reads the session's final files. So it
cannot be re-scored from its text alone the way a single-turn answer can; it is replayed.
`ReplayEngine` hands the recorded assistant turns back, token for token, to the real agent
loop (`rollout_agent`): every tool call runs again in a fresh session and the task's verifier
scores the final state. That is what a generation-cache hit for a multi-step sample does (the
model is not called), what `--reverify` re-runs, and what `posttrain replay` does for
multi-step trajectories.

A replay that asks for a turn the recording lacks (a tool answered differently this time and
the loop went on) fails with an engine error naming the task and step; it is recorded as an
infra error, never as the model's failure.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from posttrain.rollout.engine import Completion, GenRequest
from posttrain.types import Task, Trajectory, is_multi_step


def episode_options(sampling: Mapping[str, Any], seed: int, concurrency: int) -> Any:
    """Greedy or sampled episodes under the suite's temperature/top_p, within its token_budget (the whole
    conversation; none: the engine's context), tools shown as its tools_prompt says (default auto);
    step limits stay the task's."""
    from posttrain.rollout.agent.loop import AgentOptions

    budget = sampling.get("token_budget")
    return AgentOptions(n=1, temperature=float(sampling.get("temperature", 0.0)),
                        top_p=float(sampling.get("top_p", 1.0)), seed=seed, concurrency=concurrency,
                        token_budget=int(budget) if budget else None,
                        tools_prompt=str(sampling.get("tools_prompt", "auto")))


def _episodes_only(opts: Any) -> Any:
    """RolloutOptions whose one-step sampling is greedy n=1 (unused: these tasks are all multi-step)."""
    from posttrain.rollout.engine import SamplingParams
    from posttrain.rollout.entry import RolloutOptions

    return RolloutOptions(SamplingParams(temperature=opts.temperature, top_p=opts.top_p, n=opts.n, seed=opts.seed),
                          opts)


async def run_episodes(engine: Any, tok: Any, tasks: Sequence[Task], sampling: Mapping[str, Any], seed: int,
                       sandbox: Any, verifier: Any, concurrency: int) -> list[Trajectory]:
    """One scored episode per task (trajs[i] is tasks[i]'s), through the rollout entry's agent loop."""
    from posttrain.eval.core import run_scored

    opts = _episodes_only(episode_options(sampling, seed, concurrency))
    return await run_scored(engine, tok, tasks, opts, verifier, sandbox=sandbox)


async def replay_episodes(tok: Any, tasks: Sequence[Task], recorded: Sequence[Trajectory], sandbox: Any,
                          verifier: Any, concurrency: int = 8) -> list[Trajectory]:
    """Re-run each recorded episode's assistant turns against its task; trajs[i] is tasks[i]'s."""
    from posttrain.eval.core import run_scored
    from posttrain.rollout.agent.loop import AgentOptions

    # One rollout per distinct task id: the engine finds a recording by (task id, step), so
    # two recordings of one task (two epochs) must not share a call.
    waves: list[list[int]] = []
    for i, t in enumerate(tasks):
        wave = next((w for w in waves if all(tasks[j].id != t.id for j in w)), None)
        if wave is None:
            waves.append([i])
        else:
            wave.append(i)
    result: dict[int, Trajectory] = {}
    opts = _episodes_only(AgentOptions(n=1, temperature=0.0, concurrency=concurrency, retries=0))
    for wave in waves:
        engine = ReplayEngine(tok, {tasks[i].id: recorded[i] for i in wave})
        trajs = await run_scored(engine, tok, [tasks[i] for i in wave], opts, verifier, sandbox=sandbox)
        result.update(zip(wave, trajs))
    return [result[i] for i in range(len(tasks))]


async def rescore(task: Task, traj: Trajectory, sandbox: Any, verifier: Any, tok: Any = None) -> Trajectory:
    """Re-score one stored sample with today's verifier: single-turn answers are re-verified as
    they are; multi-step episodes are replayed (their final state only exists in a live session),
    which needs the model's tokenizer `tok` to rebuild the conversation."""
    if is_multi_step(task):
        if tok is None:
            raise ValueError(f"re-scoring multi-step task {task.id} replays its episode and needs the tokenizer")
        return (await replay_episodes(tok, [task], [traj], sandbox, verifier, 1))[0]
    return await verifier.verify_one(task, traj)


def load_tokenizer(model_dir: Any) -> Any:
    """Just the tokenizer of an HF model directory (or the processor's, for a vision model)."""
    from posttrain.models.vlm import is_vision_dir

    if is_vision_dir(model_dir):
        from posttrain.models.vlm import load_vlm

        return load_vlm(model_dir)[1]
    from transformers import AutoTokenizer

    from posttrain.models.io import hf_model_dir

    tok = AutoTokenizer.from_pretrained(hf_model_dir(model_dir))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


class ReplayEngine:
    """An Engine whose replies are the recorded assistant turns, looked up by (task id, step).

    Request ids from the agent loop are "step:task_id:sample:turn"; a reply is "stop" when its
    recorded ids end in EOS (the model ended its turn), else "length" (cut at the step limit),
    and the last turn of an episode that ran out of time is "deadline", as it was live.
    """

    def __init__(self, tok: Any, recordings: Mapping[str, Trajectory], max_len: int = 1 << 30) -> None:
        self.eos = tok.eos_token_id
        self.max_len = max_len
        self.weights_version = 0
        self.turns = {tid: [t for t in traj.turns if t.role == "assistant"] for tid, traj in recordings.items()}
        self.finish = {tid: traj.finish_reason for tid, traj in recordings.items()}

    def generate(self, requests: Sequence[GenRequest]) -> list[Completion]:
        return [self._one(r) for r in requests]

    def _one(self, r: GenRequest) -> Completion:
        parts = r.id.split(":")
        task_id, turn = ":".join(parts[1:-2]), int(parts[-1])
        turns = self.turns.get(task_id, [])
        if turn >= len(turns):
            return Completion(r.id, 0, (), (), "", "error",
                              f"replay of {task_id} diverged: the loop asked for step {turn}, the recording has "
                              f"{len(turns)} (a tool or the sandbox answered differently this time)")
        rec = turns[turn]
        ids, lps = tuple(rec.token_ids), tuple(rec.logprobs) or (0.0,) * len(rec.token_ids)
        if ids and ids[-1] == self.eos:
            reason = "stop"
        elif turn == len(turns) - 1 and self.finish.get(task_id) == "time_budget":
            reason = "deadline"
        else:
            reason = "length"
        return Completion(r.id, 0, ids, lps, rec.text, reason)  # type: ignore[arg-type]

    def load_weights(self, state: Any, version: int) -> None:
        raise RuntimeError("a replay engine has no weights to load")
