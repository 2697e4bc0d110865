"""Real tokenizers end to end: chat templates, stop rules, recorded ids and the oracle round trip.

Each property runs on a byte-level BPE with a ChatML template whose EOS is not its end of
turn (chat_fixtures.py), on the tiny character tokenizer, and on the real SmolLM2-135M
tokenizer when a converted directory exists (POSTTRAIN_REAL_MODELS, POSTTRAIN_SMOLLM2 or
models/smollm2).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.rollout.chat_fixtures import bpe_chat_tokenizer, real_smollm2_dir, successor_model

from posttrain.errors import PosttrainError
from posttrain.rollout.engine import Completion, GenRequest, SamplingParams
from posttrain.rollout.prompting import encode_completion, encode_prompt
from posttrain.rollout.tokenizer_checks import check_oracles_roundtrip, end_of_turn_id, stop_token_ids
from posttrain.types import Message, Spec, Task

_SMOL = real_smollm2_dir()


def _tok(name: str):
    if name == "bpe":
        return bpe_chat_tokenizer()
    if name == "tiny":
        from posttrain.models.tiny import build_tokenizer

        return build_tokenizer()
    if _SMOL is None:
        pytest.skip("no converted SmolLM2 (posttrain models get smollm2-135m-instruct --out models/smollm2)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_SMOL)


TOKENIZERS = ["bpe", "tiny", "smollm2"]
CONVERSATIONS = [
    [Message("user", "What is 2 + 2?")],
    [Message("system", "Answer briefly."), Message("user", "Name a prime.")],
    [Message("user", "hi"), Message("assistant", "Hello!"), Message("user", "Say <|im_end|> literally")],
    [Message("user", "café naïve — \\boxed{x}\n\ttabs  and  spaces ")],
]


@pytest.mark.parametrize("name", TOKENIZERS)
@pytest.mark.parametrize("conv", range(len(CONVERSATIONS)))
def test_prompt_ids_equal_apply_chat_template(name, conv):
    tok = _tok(name)
    msgs = [{"role": m.role, "content": m.content} for m in CONVERSATIONS[conv]]
    want = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    want = want["input_ids"] if hasattr(want, "keys") else want
    assert list(encode_prompt(tok, CONVERSATIONS[conv])) == list(want)


def test_end_of_turn_is_found_when_it_differs_from_eos():
    tok = bpe_chat_tokenizer()
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.eos_token_id != eot and end_of_turn_id(tok) == eot
    assert stop_token_ids(tok) == {tok.eos_token_id, eot}


def test_smollm2_ends_turns_with_its_eos():
    tok = _tok("smollm2")
    assert stop_token_ids(tok) == {tok.eos_token_id} == {tok.convert_tokens_to_ids("<|im_end|>")}


def test_demonstration_ends_with_the_token_the_template_closes_a_turn_with():
    tok = bpe_chat_tokenizer()
    assert encode_completion(tok, "42")[-1] == tok.convert_tokens_to_ids("<|im_end|>")


# ---- stopping: both engines, on a model whose greedy output is a chosen chain -------------------

def _engine(name, model, tok):
    from posttrain.rollout.engines.fast.engine import FastEngine
    from posttrain.rollout.engines.hf import HFEngine

    return (HFEngine if name == "hf" else FastEngine)(model, tok)


def _chain_run(engine_name, tok, tail_ids, params):
    prompt = encode_prompt(tok, [Message("user", "Hello world")])
    model = successor_model(tok, [prompt[-1], *tail_ids])
    [c] = _engine(engine_name, model, tok).generate([GenRequest(prompt, params)])
    return c


def _words(tok, text):
    return list(tok(text, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("engine_name", ["hf", "fast"])
def test_generation_stops_on_eos(engine_name):
    tok = bpe_chat_tokenizer()
    body = _words(tok, "Hello world")
    c = _chain_run(engine_name, tok, [*body, tok.eos_token_id, *_words(tok, " here")], SamplingParams(0.0, max_new_tokens=12))
    assert (c.token_ids, c.finish_reason, c.text) == ((*body, tok.eos_token_id), "stop", "Hello world")


@pytest.mark.parametrize("engine_name", ["hf", "fast"])
def test_generation_stops_on_the_end_of_turn_token(engine_name):
    tok = bpe_chat_tokenizer()
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    body = _words(tok, "Hello world")
    c = _chain_run(engine_name, tok, [*body, eot, *_words(tok, " here")], SamplingParams(0.0, max_new_tokens=12))
    assert (c.token_ids, c.finish_reason, c.text) == ((*body, eot), "stop", "Hello world")


@pytest.mark.parametrize("engine_name", ["hf", "fast"])
def test_multi_token_stop_string_cuts_ids_after_the_token_that_completes_it(engine_name):
    tok = bpe_chat_tokenizer()
    head, stop, tail = _words(tok, "Hello world"), _words(tok, "</tool_call>"), _words(tok, " here")
    assert len(stop) > 1 and not set(stop) & set(head + tail)
    c = _chain_run(engine_name, tok, [*head, *stop, *tail], SamplingParams(0.0, max_new_tokens=16, stop=("</tool_call>",)))
    assert c.token_ids == (*head, *stop) and len(c.logprobs) == len(c.token_ids)
    assert (c.finish_reason, c.text) == ("stop", "Hello world")


@pytest.mark.parametrize("engine_name", ["hf", "fast"])
def test_a_reply_without_a_stop_runs_to_the_budget(engine_name):
    tok = bpe_chat_tokenizer()
    c = _chain_run(engine_name, tok, _words(tok, "Hello world here"), SamplingParams(0.0, max_new_tokens=2))
    assert c.finish_reason == "length" and len(c.token_ids) == 2


# ---- the ids a trajectory records are the ones trained on ---------------------------------------

def test_single_turn_trajectory_trains_on_the_engine_ids():
    from posttrain.rollout.engines.hf import HFEngine
    from posttrain.rollout.single_turn import rollout_single_turn
    from posttrain.train.batching import pack_trajectories

    tok = bpe_chat_tokenizer()
    task = Task("t0", "demo", (Message("user", "Hello world"),), Spec("exact", {"answer": "x"}))
    prompt = encode_prompt(tok, task.prompt)
    body = _words(tok, "café naïve")  # multi-byte characters: text round trips can split them differently
    eng = HFEngine(successor_model(tok, [prompt[-1], *body, tok.eos_token_id]), tok)
    [traj] = asyncio.run(rollout_single_turn(eng, tok, [task], SamplingParams(0.0, max_new_tokens=8)))
    tb = pack_trajectories([traj], tok.pad_token_id)
    n = len(prompt) + len(body) + 1
    assert tb.input_ids[0, :n].tolist() == [*prompt, *body, tok.eos_token_id]
    assert traj.turns[0].text == "café naïve"


class _RecordingEngine:
    """Replies from a script as token ids a model would emit (text then end of turn, or cut at
    the budget); records every prompt it was asked to continue."""

    def __init__(self, tok, replies):
        self.tok, self.replies, self.prompts, self.weights_version, self.max_len = tok, list(replies), [], 0, 4096
        self.eot = end_of_turn_id(tok) or tok.eos_token_id

    def generate(self, requests):
        out = []
        for r in requests:
            self.prompts.append(tuple(r.prompt_ids))
            reply = self.replies[min(len(self.prompts) - 1, len(self.replies) - 1)]
            ids = [*self.tok(reply, add_special_tokens=False)["input_ids"], self.eot]
            reason = "stop"
            if len(ids) > r.params.max_new_tokens:
                ids, reason = ids[: r.params.max_new_tokens], "length"
            out.append(Completion(r.id, 0, tuple(ids), (-0.1,) * len(ids), reply, reason))
        return out

    def load_weights(self, state, version):
        self.weights_version = version


@pytest.mark.parametrize("name", ["bpe", "smollm2"])
@pytest.mark.parametrize("cut_first_reply", [False, True])
def test_agent_turn_ids_are_exactly_what_the_next_turn_was_conditioned_on(name, cut_first_reply):
    from tests.unit.agent.conftest import calc_task

    from posttrain.rollout.agent.loop import AgentOptions, rollout_agent
    from posttrain.rollout.agent.toolcall import format_tool_call
    from posttrain.train.batching import pack_trajectories

    tok = _tok(name)
    call = format_tool_call("calculator", {"expression": "4821*937"})
    budget = len(tok(call, add_special_tokens=False)["input_ids"]) + 1  # the call and its end of turn fit
    # a first reply cut at the budget gets an end of turn the engine never emitted: still no drift
    long = "I will think about this at length before I call the tool. " * 4
    replies = [long, call, "The answer is 4517277."] if cut_first_reply else [call, "The answer is 4517277."]
    eng = _RecordingEngine(tok, replies)
    [t] = asyncio.run(rollout_agent(eng, tok, [calc_task()], AgentOptions(max_new_tokens=budget)))
    assert t.verify.passed and (t.turns[0].text == long[: len(t.turns[0].text)]) == cut_first_reply
    starts = [i for i, x in enumerate(t.turns) if x.role == "assistant"]
    assert len(eng.prompts) == len(starts)
    for k, (prompt, at) in enumerate(zip(eng.prompts, starts)):
        want = list(t.prompt_ids) + [i for x in t.turns[:at] for i in x.token_ids]
        assert list(prompt) == want, f"turn {k}: the engine saw other ids than the trajectory records"
    seq = list(t.prompt_ids) + [i for x in t.turns for i in x.token_ids]
    tb = pack_trajectories([t], tok.pad_token_id)
    assert tb.input_ids[0, :len(seq)].tolist() == seq


# ---- start-up check: the oracle survives encode -> decode ----------------------------------------

def _task(i, oracle):
    return Task(f"t{i}", "demo", (Message("user", "q"),), Spec("exact", {"answer": oracle}), oracle=oracle)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_ascii_oracles_survive_every_tokenizer(name):
    tok = _tok(name)
    assert check_oracles_roundtrip(tok, [_task(0, "4517277"), _task(1, "def f(x):\n    return x + 1"), _task(2, None)]) == 2


def test_an_oracle_the_tokenizer_cannot_represent_fails_in_one_line_naming_the_task():
    from posttrain.models.tiny import build_tokenizer

    tok = build_tokenizer()  # character vocabulary: no Greek letters
    with pytest.raises(PosttrainError) as e:
        check_oracles_roundtrip(tok, [_task(0, "12"), _task(7, "2π r")])
    msg = str(e.value)
    assert "\n" not in msg and "task t7" in msg and "domain demo" in msg and "1 of 2" in msg


@pytest.mark.parametrize("domain", ["bfcl", "ifbench", "math500", "humaneval"])
def test_real_benchmark_oracles_survive_smollm2(domain):
    from posttrain.registry import build
    from posttrain.tasks.base import generate_split

    tok = _tok("smollm2")
    try:
        dom = build(domain, kind="domain")
    except PosttrainError as e:  # the benchmark package is not installed here
        pytest.skip(str(e))
    tasks = generate_split(dom, 200, 0, 1.0) + generate_split(dom, 200, 10_000, 1.0)
    assert check_oracles_roundtrip(tok, tasks) >= 1
