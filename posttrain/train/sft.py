"""Supervised fine-tuning on chat examples, with the loss on assistant tokens only.

    examples = [(prompt_messages, "answer"), ...]
    history = sft_train(model, tokenizer, examples, SFTConfig(steps=200))

Each example is formatted with the tokenizer's chat template; the target is the answer
followed by EOS. Batches are drawn with a seeded generator, so a run is reproducible.

The SFT data kinds of the one supervised loop (train/supervised.py): `DemoSFT` (demonstrations,
single- or multi-turn, with or without images) and `EncodedSFT` (the `posttrain sft` recipe's
chat JSONL items, packed). `sft_train`, `train_sequences`, `train_encoded` and `SupervisedLoop`
are that loop with one of them and the one-process trainer.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Sequence

import torch

from posttrain.config import OptimConfig, SFTConfig
from posttrain.rollout.prompting import encode_completion, encode_prompt
from posttrain.train.batching import pack_sequences, target_logprobs
from posttrain.train.supervised import Batch, LocalSupervisedTrainer, SupervisedRun, train_supervised
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
    """Single-turn and multi-turn demonstrations through the one loop (train/supervised.py).

    `seqs[i]` is a `pack_sequences` row: (prompt_ids, [(segment_ids, logprobs, trainable), ...]);
    the loss is the mean NLL over trainable segments. Batches are drawn with a seeded RNG.
    """
    hist = train_supervised(DemoSFT([(s, ()) for s in seqs], batch_size, pad_id), LocalSupervisedTrainer(
        model, optim, steps), steps, seed, on_step=None if on_step is None else lambda k, row: on_step(k, row["loss"]))
    return [row["loss"] for row in hist]


class DemoSFT:
    """The `SupervisedObjective` of demonstrations: items are (`pack_sequences` row, image inputs);
    the loss is the mean NLL over trainable tokens, image placeholder tokens (`image_id`) masked out.
    The image reaches the loss only through the answer tokens that attend to it."""
    what = "SFT"

    def __init__(self, items: Sequence[tuple[Any, tuple]], batch_size: int, pad_id: int,
                 image_id: int | None = None) -> None:
        self.items, self.batch_size, self.pad_id, self.image_id = list(items), batch_size, pad_id, image_id

    def draw(self, rng: random.Random) -> Batch:
        return Batch([self.items[rng.randrange(len(self.items))] for _ in range(self.batch_size)])

    def loss(self, model: Any, items: Sequence[Any], batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        tb = pack_sequences([row for row, _ in items], self.pad_id)
        if self.image_id is not None:
            tb.loss_mask[tb.input_ids[:, 1:] == self.image_id] = 0.0
        inputs = {}
        if any(images for _, images in items):
            from posttrain.rollout.vision import concat_inputs

            inputs = concat_inputs([d for _, images in items for d in images])
        logp = target_logprobs(model, tb.input_ids, tb.attention_mask, tb.loss_mask, **inputs)  # [B, L-1]
        return -(logp * tb.loss_mask).sum() / tb.loss_mask.sum().clamp(min=1), {}

    def describe(self, items: Sequence[Any]) -> str:
        return ""

    def evaluate(self, model: Any) -> dict[str, float]:
        return {}

    def for_ranks(self) -> "DemoSFT":
        return DemoSFT([], self.batch_size, self.pad_id, self.image_id)


class SupervisedLoop:
    """One optimizer step per `step()` (returns its loss), so a caller can stop early (the quickstart
    checks validation pass@1 between steps): a `SupervisedRun` over demonstrations."""

    def __init__(self, model: Any, pad_id: int, seqs: Sequence[Any], steps: int, optim: OptimConfig, batch_size: int,
                 seed: int = 0) -> None:
        self.run = SupervisedRun(DemoSFT([(s, ()) for s in seqs], batch_size, pad_id),
                                 LocalSupervisedTrainer(model, optim, steps), steps, seed)

    def step(self) -> float:
        return self.run.step()["loss"]

    @property
    def losses(self) -> list[float]:
        return [row["loss"] for row in self.run.history]


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
    """SFT on pre-encoded (ids, mask) items with packing, grad accumulation and periodic eval, in this process."""
    trainer = LocalSupervisedTrainer(model, cfg.optim, cfg.steps, tcfg)
    return train_supervised(EncodedSFT(train, cfg, pad_id, evals), trainer, cfg.steps, seed,
                            cfg.eval_every if evals else 0, on_step)


class EncodedSFT:
    """The `SupervisedObjective` of the sft recipe: (ids, mask) items, packed or padded to `sft.max_len`;
    the loss is the NLL summed over learned tokens over the batch's learned tokens (`tokens`, logged),
    so grad accumulation and dp slices sum to the one-batch loss."""
    what = "SFT"

    def __init__(self, items: Sequence[Encoded], cfg: SFTConfig, pad_id: int, evals: Sequence[Encoded] = ()) -> None:
        self.items, self.cfg, self.pad_id, self.evals = list(items), cfg, pad_id, list(evals)

    def draw(self, rng: random.Random) -> Batch:
        items = [self.items[rng.randrange(len(self.items))] for _ in range(self.cfg.batch_size)]
        # the denominator of the full batch, whatever its micro-batches and dp slices
        n_tok = sum(sum(m[1:]) for _, m in (_trunc(e, self.cfg.max_len) for e in items))
        return Batch(items, {"tokens": n_tok})

    def loss(self, model: Any, items: Sequence[Any], batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        s, _ = batch_loss(model, items, self.pad_id, self.cfg.pack, self.cfg.max_len)
        return s / max(batch.logged["tokens"], 1), {}

    def describe(self, items: Sequence[Any]) -> str:
        return ""

    def evaluate(self, model: Any) -> dict[str, float]:
        if not self.evals:
            return {}
        return {"eval/loss": eval_loss(model, self.evals, self.pad_id, self.cfg.pack, self.cfg.max_len)}

    def for_ranks(self) -> "EncodedSFT":
        return EncodedSFT([], self.cfg, self.pad_id)


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
