"""Speculative decoding for the `fast` engine: prompt lookup (n-gram) and a draft model.

A speculator proposes up to k tokens per running sequence; the target model scores
[last, d1..dk] in one forward and keeps the longest accepted prefix plus one token of
its own, so a step emits 1..k+1 tokens for the price of one (wider) forward.

Acceptance is the standard rule (Leviathan et al. 2023; Chen et al. 2023): draft token d
drawn from q is kept with probability min(1, p(d) / q(d)); at the first rejection the
replacement is drawn from norm(max(0, p - q)); if all are kept a bonus token is drawn
from p. p is the target's *warped* distribution (temperature, top-k, top-p), the one
plain sampling draws from, so speculative output has exactly the target distribution.
Prompt lookup is deterministic (q is one-hot on d): keep d with probability p(d), else
draw from p with d removed. Greedy rows keep d iff it is the target's argmax, so greedy
output equals greedy output without speculation. Logprobs are the target's raw
(temperature-1) log-softmax of each emitted token, as in plain decoding.

Limits: the draft model must share the target's vocabulary; it is not updated by
load_weights, so its acceptance rate falls as the policy drifts during RL.
"""

from __future__ import annotations

import abc
from typing import Any

import torch

from posttrain.errors import ConfigError
from posttrain.registry import registry
from posttrain.rollout.engines.fast.model import FastLM
from posttrain.rollout.engines.fast.prefill import prefill
from posttrain.rollout.engines.fast.seq import Seq
from posttrain.rollout.engines.fast.sampling import (STREAM_ACCEPT, STREAM_DRAFT, STREAM_RESIDUAL, RowParams, row_keys,
                                        sample_from_probs, uniforms, warp)

speculator = registry("speculator").register


class Speculator(abc.ABC):
    """Proposes draft tokens for the `fast` engine's sequences and verifies them against the target
    in one forward (`step`); subclasses supply `propose`. Registered with `@speculator(name)`."""

    def __init__(self, eng: Any, num_draft: int) -> None:
        self.eng, self.lookahead = eng, num_draft
        self.proposed = self.accepted = self.steps = self.emitted = self.rows = 0

    def stats(self) -> dict[str, float]:
        return dict(spec_steps=self.steps, spec_proposed=self.proposed, spec_accepted=self.accepted,
                    spec_acceptance=self.accepted / self.proposed if self.proposed else 0.0,
                    spec_tokens_per_seq_step=self.emitted / self.rows if self.rows else 0.0)

    def resize(self, n: int, cap: int) -> None:
        pass

    def admit(self, seqs: list[Seq], row0: int, prompts: list[tuple[int, ...]], counts: list[int]) -> None:
        pass

    def move(self, src: int, dst: int) -> None:
        pass

    def step(self, seqs: list[Seq]) -> list[tuple[Seq, list[int], list[float]]]:
        drafts, q = self.propose(seqs)
        if drafts.shape[1] == 0:
            return self.eng._decode()
        return self.verify(seqs, drafts, q)

    @abc.abstractmethod
    def propose(self, seqs: list[Seq]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """drafts [n, k] (-1 = no proposal) and the draft distribution q [n, k, V] (None = one-hot)."""

    def verify(self, seqs: list[Seq], drafts: torch.Tensor, q: torch.Tensor | None
               ) -> list[tuple[Seq, list[int], list[float]]]:
        """drafts [n, k] (-1 = no proposal), q [n, k, V] draft probs or None (one-hot drafts)."""
        lm, dev = self.eng.lm, self.eng.lm.device
        n, k = drafts.shape
        valid = drafts >= 0  # [n, k]
        d = drafts.clamp(min=0)
        last = torch.tensor([s.last for s in seqs], device=dev)
        start = torch.tensor([s.pos for s in seqs], device=dev)  # KV length; last sits at index start
        logits = lm.logits(lm.forward(torch.cat([last[:, None], d], 1), start, self.eng.lanes,
                                      shared=self.eng.shared_prefix()))  # [n, k+1, V]
        rp: RowParams = self.eng.row_params()
        V = logits.shape[-1]
        if rp.all_greedy:  # keep d iff it is the argmax: no distributions, no noise (overhead-bound steps)
            best = logits.argmax(-1)  # [n, k+1]
            a = ((best[:, :k] == d) & valid).long().cumprod(1).sum(1)  # [n] accepted drafts
            toks = torch.cat([d, best[:, k:]], 1).scatter(1, a[:, None], best.gather(1, a[:, None]))  # [n, k+1]
            return self._emit(seqs, toks, logits, a, valid)
        greedy = (rp.temperature == 0)[:, None]  # [n, 1]
        P = warp(logits.reshape(n * (k + 1), V), rp.select(torch.arange(n, device=dev).repeat_interleave(k + 1)))
        P = P.softmax(-1).view(n, k + 1, V)  # target's sampling distribution
        pos = start[:, None] + 1 + torch.arange(k + 1, device=dev)  # [n, k+1] index of each new token
        p_d = P[:, :k].gather(-1, d[..., None])[..., 0]  # [n, k]
        q_d = q.gather(-1, d[..., None])[..., 0] if q is not None else torch.ones_like(p_d)
        keys = row_keys(rp.seed.repeat_interleave(k), rp.sample.repeat_interleave(k), pos[:, :k].reshape(-1),
                        STREAM_ACCEPT)
        u = uniforms(keys, 1).view(n, k)
        ok = torch.where(greedy, logits[:, :k].argmax(-1) == d, u * q_d < p_d) & valid
        a = ok.long().cumprod(1).sum(1)  # [n] accepted drafts
        rows = torch.arange(n, device=dev)
        Pa = P[rows, a]  # [n, V]
        rejected = (a < valid.sum(1))[:, None]  # stopped at a proposal rather than running out
        if q is not None:
            resid = (Pa - q[rows, a.clamp(max=k - 1)]).clamp(min=0)
            resid = torch.where(resid.sum(-1, keepdim=True) > 0, resid, Pa)  # p == q: any draw is exact
        else:
            resid = Pa.scatter(-1, d[rows, a.clamp(max=k - 1)][:, None], 0.0)
        dist = torch.where(rejected, resid, Pa)
        final = sample_from_probs(dist, row_keys(rp.seed, rp.sample, pos[rows, a], STREAM_RESIDUAL))
        final = torch.where(greedy[:, 0], logits[rows, a].argmax(-1), final)
        toks = torch.cat([d, final[:, None]], 1).scatter(1, a[:, None], final[:, None])  # [n, k+1]
        return self._emit(seqs, toks, logits, a, valid)

    def _emit(self, seqs: list[Seq], toks: torch.Tensor, logits: torch.Tensor, a: torch.Tensor, valid: torch.Tensor
              ) -> list[tuple[Seq, list[int], list[float]]]:
        """Each row's accepted drafts and its own token (toks [n, k+1], a [n] accepted) with raw logprobs."""
        lps = logits.log_softmax(-1).gather(-1, toks[..., None])[..., 0]  # [n, k+1]
        out, a_list, t_list, l_list = [], a.tolist(), toks.tolist(), lps.tolist()
        self.steps += 1
        self.rows += len(seqs)
        self.proposed += int(valid.sum())
        self.accepted += sum(a_list)
        for s, ai, tl, ll in zip(seqs, a_list, t_list, l_list):
            s.pos += ai + 1
            s.draft_pos = min(s.draft_pos, s.pos)
            self.emitted += ai + 1
            out.append((s, tl[: ai + 1], ll[: ai + 1]))
        return out


@speculator("ngram")
class NgramSpeculator(Speculator):
    """Prompt lookup: continue the latest earlier occurrence of the context's last n-gram."""

    def __init__(self, eng: Any, num_draft: int = 4, ngram_max: int = 3, **_: Any) -> None:
        super().__init__(eng, num_draft)
        self.nmax = ngram_max

    def _state(self, s: Seq) -> tuple[list[int], dict]:
        """The sequence's tokens and n-gram -> next-position index, brought up to date."""
        if s.spec is None:
            s.spec = (list(s.prompt), {}, [0])
        toks, idx, done = s.spec
        toks.extend(s.out[len(toks) - len(s.prompt):])
        for p in range(done[0], len(toks) - 1):  # n-grams ending before the tail; newest wins
            for m in range(1, min(self.nmax, p + 1) + 1):
                idx[tuple(toks[p - m + 1:p + 1])] = p + 1
        done[0] = max(done[0], len(toks) - 1)
        return toks, idx

    def propose(self, seqs: list[Seq]) -> tuple[torch.Tensor, None]:
        props = []
        for s in seqs:
            toks, idx = self._state(s)
            prop: list[int] = []
            for m in range(min(self.nmax, len(toks)), 0, -1):
                j = idx.get(tuple(toks[-m:]))
                if j is not None:
                    prop = toks[j:j + self.lookahead]
                    break
            props.append(prop)
        k = max(len(p) for p in props)
        out = torch.full((len(seqs), k), -1, dtype=torch.long)
        for i, p in enumerate(props):
            out[i, : len(p)] = torch.tensor(p, dtype=torch.long)
        return out.to(self.eng.lm.device), None


@speculator("draft")
class DraftSpeculator(Speculator):
    """A small draft model with the target's tokenizer proposes k tokens autoregressively."""

    def __init__(self, eng: Any, num_draft: int = 4, draft_model: Any = None, **_: Any) -> None:
        super().__init__(eng, num_draft)
        if draft_model is None:
            raise ConfigError("speculative='draft' needs draft_model (an HF causal LM sharing the tokenizer)")
        self.dlm = FastLM.from_hf(draft_model, eng.lm.dtype, eng.lm.device)
        if self.dlm.shape.vocab != eng.lm.shape.vocab:
            raise ConfigError(f"draft model vocabulary {self.dlm.shape.vocab} != target {eng.lm.shape.vocab}")
        self.lanes = None

    def resize(self, n: int, cap: int) -> None:
        self.lanes = self.dlm.new_lanes(n, cap)

    def admit(self, seqs: list[Seq], row0: int, prompts: list[tuple[int, ...]], counts: list[int]) -> None:
        prefill(self.dlm, self.lanes, None, prompts, counts, row0, None)
        for s in seqs:
            s.draft_pos = len(s.prompt)

    def move(self, src: int, dst: int) -> None:
        self.lanes.move(src, dst)

    def propose(self, seqs: list[Seq]) -> tuple[torch.Tensor, torch.Tensor]:
        dev, n, k = self.eng.lm.device, len(seqs), self.lookahead
        rp: RowParams = self.eng.row_params()
        feeds = [s.tokens[s.draft_pos:] for s in seqs]  # tokens the draft has not seen (>= 1: `last`)
        width = max(len(f) for f in feeds)
        tokens = torch.zeros(n, width, dtype=torch.long)
        for i, f in enumerate(feeds):
            tokens[i, : len(f)] = torch.tensor(f, dtype=torch.long)
        start = torch.tensor([s.draft_pos for s in seqs], device=dev)
        h = self.dlm.forward(tokens.to(dev), start, self.lanes)  # [n, width, H]
        h = h[torch.arange(n, device=dev), torch.tensor([len(f) - 1 for f in feeds], device=dev)]
        nxt = torch.tensor([s.length for s in seqs], device=dev)  # index of the first draft token
        drafts, qs = [], []
        for j in range(k):
            logits = self.dlm.logits(h)  # [n, V]
            q = warp(logits, rp).softmax(-1)
            tok = sample_from_probs(q, row_keys(rp.seed, rp.sample, nxt + j, STREAM_DRAFT))
            tok = torch.where(rp.temperature == 0, logits.argmax(-1), tok)
            drafts.append(tok)
            qs.append(q)
            if j + 1 < k:
                h = self.dlm.forward(tok[:, None], nxt + j, self.lanes)[:, 0]
        for s in seqs:
            s.draft_pos = s.length + k - 1  # draft KV now covers tokens up to d_{k-1}
        return torch.stack(drafts, 1), torch.stack(qs, 1)  # [n, k], [n, k, V]
