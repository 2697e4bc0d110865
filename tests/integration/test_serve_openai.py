"""The official `openai` client against `posttrain serve` (a real uvicorn server, tiny model)."""

from __future__ import annotations

import concurrent.futures as cf
import copy

import openai
import pytest

from posttrain.rollout.engine import GenRequest, SamplingParams
from tests.unit.serve.conftest import ANSWER, CALL, TOOLS, memorised, observation, served  # noqa: F401

Q = [{"role": "user", "content": "What is 2*3?"}]


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=served[0] + "/v1", api_key="unused", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def direct(memorised):
    """A second engine on the same weights: the reference for greedy equality."""
    from posttrain.rollout.engines.fast.engine import FastEngine

    model, tok = memorised
    return FastEngine(copy.deepcopy(model), tok), tok


def _prompt(state, msgs):
    from posttrain.serve.protocol import ChatMessage

    return state.fmt.prompt_ids([ChatMessage.model_validate(m) for m in msgs], None)


def _direct_ids(direct, prompt_ids, max_new):
    eng, _ = direct
    return eng.generate([GenRequest(tuple(prompt_ids), SamplingParams(temperature=0.0, max_new_tokens=max_new))])[0]


def test_models_lists_the_served_model(client):
    assert [m.id for m in client.models.list().data] == ["tiny"]


def test_greedy_chat_equals_the_engines_direct_output(client, served, direct):
    r = client.chat.completions.create(model="tiny", messages=Q, temperature=0, max_tokens=90, logprobs=True)
    state = served[1]
    want = _direct_ids(direct, _prompt(state, Q), 90)
    assert r.choices[0].message.content == state.fmt.reply_text(want.token_ids)
    assert [e.logprob for e in r.choices[0].logprobs.content] == list(want.logprobs)
    assert r.usage.completion_tokens == len(want.token_ids)


def test_tools_come_back_as_openai_tool_calls(client):
    r = client.chat.completions.create(model="tiny", messages=Q, tools=TOOLS, temperature=0, max_tokens=90)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "calculator"
    assert call.function.arguments == '{"expression": "2*3"}' and call.id.startswith("call_")


def test_tool_call_history_round_trips_to_the_answer(client):
    first = client.chat.completions.create(model="tiny", messages=Q, tools=TOOLS, temperature=0, max_tokens=90)
    msg = first.choices[0].message
    history = Q + [{"role": "assistant", "content": msg.content, "tool_calls": [tc.model_dump() for tc in msg.tool_calls]},
                   {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": observation()}]
    r = client.chat.completions.create(model="tiny", messages=history, tools=TOOLS, temperature=0, max_tokens=40)
    assert r.choices[0].message.content == ANSWER and r.choices[0].finish_reason == "stop"


def test_streamed_chat_equals_the_non_streamed_reply(client):
    kw = dict(model="tiny", messages=Q, temperature=0.8, seed=7, max_tokens=60)
    full = client.chat.completions.create(**kw).choices[0].message.content
    parts = [c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **kw) if c.choices]
    assert "".join(parts) == full


def test_streamed_tool_call_arrives_as_a_tool_calls_delta(client):
    chunks = list(client.chat.completions.create(model="tiny", messages=Q, tools=TOOLS, temperature=0, max_tokens=90,
                                                 stream=True))
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].function.name == "calculator" and chunks[-1].choices[0].finish_reason == "tool_calls"
    assert "<tool_call>" not in "".join(c.choices[0].delta.content or "" for c in chunks)


def test_completions_stream_and_not_agree(client):
    kw = dict(model="tiny", prompt="<|user|>What is 2*3?<|end|><|assistant|>", temperature=0, max_tokens=30)
    full = client.completions.create(**kw).choices[0].text
    streamed = "".join(c.choices[0].text for c in client.completions.create(stream=True, **kw))
    assert streamed == full and full.startswith("<tool_call>")


def test_n_samples_are_independent_and_indexed(client):
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hello"}], n=4,
                                       temperature=1.0, seed=3, max_tokens=20)
    assert sorted(c.index for c in r.choices) == [0, 1, 2, 3]
    assert len({c.message.content for c in r.choices}) > 1


def test_stop_string_cuts_the_reply_before_it(client):
    r = client.chat.completions.create(model="tiny", messages=Q, temperature=0, max_tokens=90, stop=["calc"])
    assert r.choices[0].message.content == '<tool_call>{"name":"' and r.choices[0].finish_reason == "stop"
    s = client.completions.create(model="tiny", prompt="<|user|>What is 2*3?<|end|><|assistant|>", temperature=0,
                                  max_tokens=90, stop="arguments", stream=True)
    assert "".join(c.choices[0].text for c in s) == '<tool_call>{"name":"calculator","'


def test_top_logprobs_rank_the_greedy_token_first(client):
    r = client.chat.completions.create(model="tiny", messages=Q, temperature=0, max_tokens=12, logprobs=True,
                                       top_logprobs=3)
    for e in r.choices[0].logprobs.content:
        assert len(e.top_logprobs) == 3 and e.top_logprobs[0].token == e.token
        assert abs(e.top_logprobs[0].logprob - e.logprob) < 1e-4
    c = client.completions.create(model="tiny", prompt="hello", max_tokens=5, logprobs=2, temperature=0)
    assert len(c.choices[0].logprobs.tokens) == 5 and all(len(t) == 2 for t in c.choices[0].logprobs.top_logprobs)


def test_concurrent_clients_get_their_own_answers(client, served, direct):
    prompts = [[{"role": "user", "content": f"q{i} " * (1 + i % 3)}] for i in range(12)] + [Q] * 4
    state = served[1]

    def ask(msgs):
        return client.chat.completions.create(model="tiny", messages=msgs, temperature=0, max_tokens=24)

    with cf.ThreadPoolExecutor(16) as pool:
        got = list(pool.map(ask, prompts))
    for msgs, r in zip(prompts, got):
        want = _direct_ids(direct, _prompt(state, msgs), 24)
        assert r.choices[0].message.content == state.fmt.reply_text(want.token_ids)


NAMED = {"type": "function", "function": {"name": "calculator"}}


def _after_the_tool():
    return Q + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression":"2*3"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": observation()}]


def _forced_reply(state, direct, msgs, choice, max_new):
    """What the server must answer: the engine's greedy continuation of prompt + forced ids, parsed with the
    forced text in front."""
    from posttrain.serve.protocol import ChatRequest

    body = ChatRequest.model_validate({"model": "tiny", "messages": msgs, "tools": TOOLS, "tool_choice": choice})
    text, forced = state.fmt.forced_prefix(body.tools, body.tool_choice)
    prompt = state.fmt.prompt_ids(body.messages, body.tools)
    out = _direct_ids(direct, tuple(prompt) + forced, max_new)
    return state.fmt.reply_message(text + state.fmt.reply_text(out.token_ids), body.tools, choice, out.finish_reason,
                                   "r"), len(prompt) + len(forced), out


def test_tool_choice_required_forces_a_call_where_the_model_would_answer(client, served, direct):
    msgs = _after_the_tool()  # unforced, the model answers "The answer is 6." here
    assert client.chat.completions.create(model="tiny", messages=msgs, tools=TOOLS, temperature=0,
                                          max_tokens=40).choices[0].message.content == ANSWER
    r = client.chat.completions.create(model="tiny", messages=msgs, tools=TOOLS, tool_choice="required",
                                       temperature=0, max_tokens=40, logprobs=True)
    (want, finish), prompt_len, out = _forced_reply(served[1], direct, msgs, "required", 40)
    choice = r.choices[0]
    assert choice.finish_reason == finish
    if finish == "tool_calls":  # parsed: OpenAI's shape
        assert choice.message.tool_calls[0].function.name == want["tool_calls"][0]["function"]["name"]
    else:  # the tiny model's arguments do not parse: the reply is still the forced opening + what it sampled
        assert choice.message.content == want["content"] and want["content"].startswith("<tool_call>")
    assert r.usage.prompt_tokens == prompt_len and r.usage.completion_tokens == len(out.token_ids)
    assert [e.logprob for e in choice.logprobs.content] == list(out.logprobs)  # sampled tokens only
    first = client.chat.completions.create(model="tiny", messages=Q, tools=TOOLS, tool_choice="required",
                                           temperature=0, max_tokens=90).choices[0]
    assert first.finish_reason == "tool_calls" and first.message.tool_calls[0].function.name == "calculator"


def test_a_named_tool_choice_yields_a_call_to_that_function(client, served, direct):
    r = client.chat.completions.create(model="tiny", messages=Q, tools=TOOLS, tool_choice=NAMED, temperature=0,
                                       max_tokens=90)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls[0].function.name == "calculator"
    assert choice.message.tool_calls[0].function.arguments == '{"expression": "2*3"}'
    (want, _), prompt_len, _ = _forced_reply(served[1], direct, Q, NAMED, 90)
    assert r.usage.prompt_tokens == prompt_len  # the name was forced: prompt tokens, not sampled
    chunks = list(client.chat.completions.create(model="tiny", messages=Q, tools=TOOLS, tool_choice=NAMED,
                                                 temperature=0, max_tokens=90, stream=True))
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [tc.function.name for tc in calls] == ["calculator"]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    msgs = _after_the_tool()  # forced where the model would answer: the reply opens the named call all the same
    (want, finish), _, _ = _forced_reply(served[1], direct, msgs, NAMED, 40)
    got = client.chat.completions.create(model="tiny", messages=msgs, tools=TOOLS, tool_choice=NAMED, temperature=0,
                                         max_tokens=40).choices[0]
    assert got.finish_reason == finish
    if finish != "tool_calls":
        assert got.message.content == want["content"]
        assert got.message.content.startswith('<tool_call>{"name":"calculator","arguments":')


def test_a_tool_choice_naming_an_unknown_function_is_a_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=Q, tools=TOOLS,
                                       tool_choice={"type": "function", "function": {"name": "nope"}})
    assert e.value.status_code == 400
    assert e.value.body["param"] == "tool_choice" and "nope" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="tiny", messages=Q, tool_choice="required")  # no tools to call
