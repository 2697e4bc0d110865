"""Supervised fine-tuning on chat examples, with the loss on assistant tokens only.

    examples = [(prompt_messages, "answer"), ...]
    history = sft_train(model, tokenizer, examples, SFTConfig(steps=200))

Each example is formatted with the tokenizer's chat template; the target is the answer
followed by EOS. Batches are drawn with a seeded generator, so a run is reproducible.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Sequence

import torch

from posttrain.config import OptimConfig, SFTConfig
from posttrain.rollout.prompting import encode_completion, encode_prompt
from posttrain.train.batching import pack_sequences, token_logprobs
from posttrain.train.optim import build_optimizer, build_schedule
from posttrain.types import Message

Example = tuple[Sequence[Message], str]


def encode_examples(tokenizer: Any, examples: Sequence[Example]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [(encode_prompt(tokenizer, msgs), encode_completion(tokenizer, ans)) for msgs, ans in examples]


def demo_sequences(tokenizer: Any, examples: Sequence[Example]) -> list[Any]:
    """Single-turn demonstrations as `pack_sequences` rows: the answer is the one trained segment."""
    return [(p, [(c, (), True)]) for p, c in encode_examples(tokenizer, examples)]


def sft_train(model: Any, tokenizer: Any, examples: Sequence[Example], cfg: SFTConfig, seed: int = 0,
              on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Train in place; returns the loss per step. Loss = mean NLL over answer tokens."""
    return train_sequences(model, tokenizer.pad_token_id, demo_sequences(tokenizer, examples), cfg.steps, cfg.optim,
                           cfg.batch_size, seed, on_step)


def train_sequences(model: Any, pad_id: int, seqs: Sequence[Any], steps: int, optim: OptimConfig, batch_size: int,
                    seed: int = 0, on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """The supervised loop shared by single-turn and multi-turn demonstrations.

    `seqs[i]` is a `pack_sequences` row: (prompt_ids, [(segment_ids, logprobs, trainable), ...]);
    the loss is the mean NLL over trainable segments. Batches are drawn with a seeded RNG.
    """
    loop = SupervisedLoop(model, pad_id, seqs, steps, optim, batch_size, seed)
    for step in range(steps):
        loss = loop.step()
        if on_step is not None:
            on_step(step, loss)
    model.eval()
    return loop.losses


class SupervisedLoop:
    """One optimizer step per `step()`, so a caller can stop early (the quickstart checks
    validation pass@1 between steps). Optimizer and LR schedule from `optim` (train/optim.py)."""

    def __init__(self, model: Any, pad_id: int, seqs: Sequence[Any], steps: int, optim: OptimConfig, batch_size: int,
                 seed: int = 0) -> None:
        self.model, self.pad_id, self.seqs, self.batch_size = model, pad_id, seqs, batch_size
        self.rng = random.Random(seed)
        self.opt = build_optimizer(model.parameters(), optim)
        self.sched = build_schedule(self.opt, optim, steps)
        self.losses: list[float] = []

    def step(self) -> float:
        self.model.train()
        tb = pack_sequences([self.seqs[self.rng.randrange(len(self.seqs))] for _ in range(self.batch_size)],
                            self.pad_id)
        logp, _ = token_logprobs(self.model, tb.input_ids, tb.attention_mask)  # [B, L-1]
        loss = -(logp * tb.loss_mask).sum() / tb.loss_mask.sum()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.sched.step()
        self.losses.append(loss.item())
        return self.losses[-1]


# ---- the `posttrain sft CONFIG` recipe: JSONL chat data, packing, eval loss, run directory ----

Encoded = tuple[list[int], list[int]]  # (ids, assistant-token mask), see chat_data.encode_conversation


def batch_loss(model: Any, items: Sequence[Encoded], pad_id: int, pack: bool, max_len: int) -> tuple[torch.Tensor, float]:
    """(summed NLL over learned tokens, number of learned tokens) for one micro-batch."""
    from posttrain.train.packing import batch_logprobs, pack_examples, packed_batch, padded_batch, truncate

    pb = packed_batch(pack_examples(items, max_len), pad_id) if pack else \
        padded_batch([truncate(e, max_len) for e in items], pad_id)
    logp = batch_logprobs(model, pb)  # [R, L-1]
    return -(logp * pb.loss_mask).sum(), float(pb.loss_mask.sum())


def eval_loss(model: Any, items: Sequence[Encoded], pad_id: int, pack: bool, max_len: int, batch: int = 64) -> float:
    """Token-mean NLL over `items` (no gradient)."""
    was = model.training
    model.eval()
    tot, n = 0.0, 0.0
    with torch.no_grad():
        for i in range(0, len(items), batch):
            s, k = batch_loss(model, items[i:i + batch], pad_id, pack, max_len)
            tot, n = tot + float(s), n + k
    model.train(was)
    return tot / max(n, 1.0)


def train_encoded(model: Any, pad_id: int, train: Sequence[Encoded], cfg: SFTConfig, tcfg: Any, seed: int = 0,
                  evals: Sequence[Encoded] = (), on_step: Callable[[int, dict], None] | None = None) -> list[dict]:
    """SFT on pre-encoded (ids, mask) items with packing, grad accumulation and periodic eval."""
    from posttrain.train.lora import autocast, trainable_parameters
    from posttrain.train.update import NonFiniteLoss

    rng = random.Random(seed)
    params = trainable_parameters(model)
    opt = build_optimizer(params, cfg.optim)
    sched = build_schedule(opt, cfg.optim, cfg.steps)
    accum = max(1, tcfg.grad_accum)
    model.train()
    history = []
    for step in range(cfg.steps):
        batch = [train[rng.randrange(len(train))] for _ in range(cfg.batch_size)]
        micro = [batch[i::accum] for i in range(accum) if batch[i::accum]]
        n_tok = sum(sum(m[1:]) for _, m in (_trunc(e, cfg.max_len) for e in batch))  # denominator of the full batch
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for k, mb in enumerate(micro):
            with autocast(tcfg):
                s, _ = batch_loss(model, mb, pad_id, cfg.pack, cfg.max_len)
            loss = s / max(n_tok, 1)
            if not math.isfinite(float(loss.detach())):
                raise NonFiniteLoss(f"non-finite SFT loss at step {step}, micro-batch {k}")
            loss.backward()
            total += float(loss.detach())
        gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        row = {"loss": total, "grad_norm": float(gnorm), "lr": sched.get_last_lr()[0], "tokens": n_tok}
        if evals and cfg.eval_every and ((step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps):
            row["eval/loss"] = eval_loss(model, evals, pad_id, cfg.pack, cfg.max_len)
        history.append(row)
        if on_step is not None:
            on_step(step, row)
    model.eval()
    return history


def _trunc(e: Encoded, max_len: int) -> Encoded:
    from posttrain.train.packing import truncate

    return truncate(e, max_len)


def sft_data(cfg: Any, tok: Any, splits: Any = None) -> tuple[list[Encoded], list[Encoded]]:
    """(train, eval) items: from `sft.data` JSONL (eval from `sft.eval_data` or a seeded
    `sft.eval_frac` split), or else oracle demonstrations of the configured task domains
    (`splits`, or `make_splits(cfg)`)."""
    from posttrain.train.chat_data import encode_all, load_sft_jsonl

    s = cfg.sft
    if s.data is None:
        from posttrain.tasks.splits import make_splits

        sp = splits or make_splits(cfg)
        demo = lambda ts: [(*t.prompt, Message("assistant", t.oracle)) for t in ts if t.oracle is not None]  # noqa: E731
        return encode_all(tok, demo(sp.train), "oracle demos"), encode_all(tok, demo(sp.held_out), "held-out demos")
    train = encode_all(tok, load_sft_jsonl(s.data), s.data)
    if s.eval_data is not None:
        return train, encode_all(tok, load_sft_jsonl(s.eval_data), s.eval_data)
    if not s.eval_every or len(train) < 2:
        return train, []
    order = list(range(len(train)))
    random.Random(cfg.seed).shuffle(order)
    k = max(1, int(len(train) * s.eval_frac))
    return [train[i] for i in order[k:]], [train[i] for i in order[:k]]
