"""Direct preference optimisation: `posttrain dpo CONFIG`.

    pairs = load_pairs_jsonl("pairs.jsonl", tok)            # or pairs_from_run("runs/x", tok)
    ref = reference_logprobs(model, pairs, pad_id)           # once, before the first step
    history = train_dpo(model, pairs, ref, cfg.dpo, cfg.trainer, pad_id)

A pair is (prompt ids, chosen ids, rejected ids), each completion ending with EOS. The
reference model is the policy as it was before training; its summed completion logprobs
are computed once and stored, so no second model is held in memory during training. The
loss (`dpo.loss`: sigmoid or ipo) comes from the `dpo_loss` registry in losses.py.
`PairObjective` is DPO's data kind in the one supervised loop (train/supervised.py);
`train_dpo` is that loop with the one-process trainer.

Pairs come from a JSONL file (`{"prompt" | "messages", "chosen", "rejected"}`, strings or
TRL-style message lists) or from an RL run: for each task, the highest-reward against the
lowest-reward single-turn completion, when the rewards differ by at least
`dpo.min_reward_gap` and neither is an infrastructure error.

Image tasks: `vision_dpo.image_pairs(tok, tasks, rejected)` builds pairs whose prompts carry
a VLM's image inputs; the same functions train on them (the image placeholders sit in the
prompt, outside the loss, and the gradient reaches the vision tower through the answers).

In a pairs JSONL, a prompt whose messages carry `attachments` (the task-file format, image
paths relative to the JSONL) makes an image pair; the policy is then a VLM (`model.vision`
set, or `model.path` a vision-language model directory) and is saved with its processor.

Limits: pairs from a run use single-turn trajectories only (a multi-turn episode has no
single completion to prefer); use `posttrain postmortem` for those. Pairs from a run are
text-only: a run keeps task versions, not pixels, so an image run is refused by name.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from posttrain.errors import TaskFileError
from posttrain.train.chat_data import encode_conversation, parse_messages, read_jsonl
from posttrain.train.pairs import Pair  # noqa: F401  (re-exported: the pair type of this module)
from posttrain.types import Message


def _completion_text(v: Any, where: str, field: str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        msgs = parse_messages(v, where, field)
        if len(msgs) == 1 and msgs[0].role == "assistant":
            return msgs[0].content
    raise TaskFileError(f"{where}: field {field!r} must be a string or a one-message assistant list")


def encode_pair(tok: Any, prompt: Sequence[Message], chosen: str, rejected: str, where: str) -> Pair:
    """Through the chat template, so a template that cannot be split is a named mismatch."""
    out = []
    for text in (chosen, rejected):
        ids, mask = encode_conversation(tok, (*prompt, Message("assistant", text)), where)
        cut = mask.index(1) if 1 in mask else len(ids)
        out.append((tuple(ids[:cut]), tuple(ids[cut:])))
    return Pair(out[0][0], out[0][1], out[1][1], where)


def load_pairs_jsonl(path: str | Path, tok: Any) -> list[Pair]:
    from posttrain.train.vision_dpo import has_attachments, image_pair_from_row

    pairs = []
    for n, obj in read_jsonl(path):
        where = f"{path}:{n}"
        for k in ("chosen", "rejected"):
            if k not in obj:
                raise TaskFileError(f"{where}: missing field {k!r} (a DPO row needs prompt or messages, chosen, rejected)")
        raw = obj["messages"] if "messages" in obj else obj.get("prompt")
        if has_attachments(raw):  # images: the VLM's processor builds the prompt (vision_dpo)
            pairs.append(image_pair_from_row(tok, raw, _completion_text(obj["chosen"], where, "chosen"),
                                             _completion_text(obj["rejected"], where, "rejected"), where,
                                             Path(path).parent))
            continue
        if "messages" in obj:
            prompt = parse_messages(obj["messages"], where)
        elif isinstance(obj.get("prompt"), str):
            prompt = (Message("user", obj["prompt"]),)
        elif isinstance(obj.get("prompt"), list):
            prompt = parse_messages(obj["prompt"], where, "prompt")
        else:
            raise TaskFileError(f"{where}: missing field 'prompt' (a string or a message list) or 'messages'")
        pairs.append(encode_pair(tok, prompt, _completion_text(obj["chosen"], where, "chosen"),
                                 _completion_text(obj["rejected"], where, "rejected"), where))
    return pairs


def pairs_from_run(run_dir: str | Path, min_gap: float = 0.5) -> list[Pair]:
    """Best vs worst single-turn completion per task from the run's trajectory store."""
    from posttrain.store.run import TRAJECTORIES, RunDir

    by_task: dict[str, list] = {}
    with RunDir(run_dir).queries() as q:  # read-only: a DPO run never writes to the RL run it reads
        if q is None:
            raise TaskFileError(f"dpo.from_run: no {TRAJECTORIES} in {run_dir}")
        for t in q.trajectories():
            if t.infra_error or t.error is not None or len(t.turns) != 1 or not t.turns[0].token_ids:
                continue
            by_task.setdefault(t.task_id, []).append(t)
    pairs = []
    for task_id in sorted(by_task):
        ts = sorted(by_task[task_id], key=lambda t: (-t.reward, t.step, t.sample))
        best, worst = ts[0], ts[-1]
        if best.reward - worst.reward >= min_gap and best.prompt_ids == worst.prompt_ids:
            pairs.append(Pair(best.prompt_ids, best.turns[0].token_ids, worst.turns[0].token_ids,
                              f"{task_id} step {best.step}/{worst.step}"))
    if not pairs:
        raise TaskFileError(f"dpo.from_run: no task in {run_dir} has completions whose rewards differ by "
                            f">= {min_gap} (dpo.min_reward_gap)")
    return pairs


def sequence_logprobs(model: Any, pairs: Sequence[Pair], pad_id: int, max_len: int) -> tuple[torch.Tensor, ...]:
    """Summed completion logprobs and token counts: (pc, pr, nc, nr), each [N]."""
    from posttrain.train.packing import batch_logprobs, padded_batch, truncate

    for p in pairs:  # truncation would cut image placeholders away from their pixels
        if p.images and len(p.prompt) + max(len(p.chosen), len(p.rejected)) > max_len:
            raise TaskFileError(f"DPO pair {p.source or '(unnamed)'}: an image prompt of {len(p.prompt)} tokens plus "
                                f"its completions exceeds dpo.max_len={max_len} and cannot be truncated; raise it")
    items = [truncate((list(p.prompt) + list(c), [0] * len(p.prompt) + [1] * len(c)), max_len)
             for c_side in ("chosen", "rejected") for p in pairs for c in [getattr(p, c_side)]]
    pb = padded_batch(items, pad_id)
    images = [d for _ in range(2) for p in pairs for d in p.images]  # rows: chosen then rejected
    if images:
        from posttrain.rollout.vision import concat_inputs

        logp = batch_logprobs(model, pb, **concat_inputs(images))  # [2N, L-1]
    else:
        logp = batch_logprobs(model, pb)  # [2N, L-1]
    seq = (logp * pb.loss_mask).sum(-1)  # [2N]
    n = pb.loss_mask.sum(-1)
    N = len(pairs)
    return seq[:N], seq[N:], n[:N], n[N:]


@torch.no_grad()
def reference_logprobs(model: Any, pairs: Sequence[Pair], pad_id: int, max_len: int, batch: int = 32) -> torch.Tensor:
    """[N, 2]: the frozen reference's summed logprobs of (chosen, rejected), computed once."""
    was = model.training
    model.eval()
    out = []
    for i in range(0, len(pairs), batch):
        pc, pr, _, _ = sequence_logprobs(model, pairs[i:i + batch], pad_id, max_len)
        out.append(torch.stack([pc, pr], -1))
    model.train(was)
    return torch.cat(out)


def pair_loss(model: Any, pairs: Sequence[Pair], ref: torch.Tensor, cfg: Any, pad_id: int) -> tuple[torch.Tensor, dict]:
    from posttrain.registry import registry

    import posttrain.train.losses  # noqa: F401  (registers the dpo_loss family)

    fn = registry("dpo_loss").get(cfg.loss.name)
    pc, pr, nc, nr = sequence_logprobs(model, pairs, pad_id, cfg.max_len)
    losses = fn(pc, pr, ref[:, 0], ref[:, 1], nc, nr, beta=cfg.beta, **cfg.loss.args)  # [N]
    margin = ((pc - ref[:, 0]) - (pr - ref[:, 1])).detach()
    return losses, {"accuracy": float((margin > 0).float().mean()), "margin": float(margin.mean())}


def evaluate_pairs(model: Any, pairs: Sequence[Pair], ref: torch.Tensor, cfg: Any, pad_id: int) -> dict[str, float]:
    was = model.training
    model.eval()
    with torch.no_grad():
        losses, st = pair_loss(model, pairs, ref, cfg, pad_id)
    model.train(was)
    return {"eval/loss": float(losses.mean()), "eval/accuracy": st["accuracy"], "eval/margin": st["margin"]}


def train_dpo(model: Any, pairs: Sequence[Pair], ref: torch.Tensor, cfg: Any, tcfg: Any, pad_id: int, seed: int = 0,
              evals: tuple[Sequence[Pair], torch.Tensor] | None = None,
              on_step: Callable[[int, dict], None] | None = None) -> list[dict]:
    """DPO in this process, through the one supervised loop (train/supervised.py)."""
    from posttrain.train.supervised import LocalSupervisedTrainer, train_supervised

    return train_supervised(PairObjective(pairs, ref, cfg, pad_id, evals),
                            LocalSupervisedTrainer(model, cfg.optim, cfg.steps, tcfg), cfg.steps, seed,
                            cfg.eval_every if evals is not None else 0, on_step)


class PairObjective:
    """The `SupervisedObjective` of DPO, text or image pairs: a batch is `dpo.batch_size` pairs drawn
    with their reference logprobs; the loss is the `dpo.loss` mean over the batch, with accuracy and margin."""
    what = "DPO"

    def __init__(self, pairs: Sequence[Pair], ref: torch.Tensor, cfg: Any, pad_id: int,
                 evals: tuple[Sequence[Pair], torch.Tensor] | None = None) -> None:
        self.pairs, self.ref, self.cfg, self.pad_id, self.evals = list(pairs), ref, cfg, pad_id, evals  # ref: [N, 2]

    def draw(self, rng: random.Random) -> Any:
        from posttrain.train.supervised import Batch

        idx = [rng.randrange(len(self.pairs)) for _ in range(min(self.cfg.batch_size, len(self.pairs)))]
        return Batch(list(zip([self.pairs[i] for i in idx], self.ref[idx].unbind(0))))  # (pair, ref [2])

    def loss(self, model: Any, items: Sequence[tuple[Pair, torch.Tensor]], batch: Any) -> tuple[torch.Tensor, dict]:
        losses, st = pair_loss(model, [p for p, _ in items], torch.stack([r for _, r in items]), self.cfg, self.pad_id)
        n = len(batch.items)  # the mean over the whole batch, split across micro-batches
        return losses.sum() / n, {k: st[k] * len(items) / n for k in ("accuracy", "margin")}

    def describe(self, items: Sequence[tuple[Pair, torch.Tensor]]) -> str:
        return f" (pairs {[p.source for p, _ in items[:3]]})"

    def evaluate(self, model: Any) -> dict[str, float]:
        return {} if self.evals is None else evaluate_pairs(model, self.evals[0], self.evals[1], self.cfg, self.pad_id)

    def for_ranks(self) -> "PairObjective":
        return PairObjective([], self.ref[:0], self.cfg, self.pad_id)


def load_pairs(cfg: Any, tok: Any) -> list[Pair]:
    d = cfg.dpo
    if (d.data is None) == (d.from_run is None):
        from posttrain.errors import ConfigError

        raise ConfigError("set exactly one of dpo.data (a pairs JSONL) or dpo.from_run (a run directory)")
    return load_pairs_jsonl(d.data, tok) if d.data is not None else pairs_from_run(d.from_run, d.min_reward_gap)
