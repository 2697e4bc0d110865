"""OpenAI messages and tool calls <-> the project's token ids and call text (no server)."""

from __future__ import annotations

import pytest

from posttrain.serve.chat import ChatFormat, TextStream
from posttrain.serve.protocol import ApiError, ChatMessage, ChatRequest, CompletionRequest, ToolSpec, parse

TOOL = ToolSpec.model_validate({"type": "function", "function": {"name": "calculator", "parameters": {
    "type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}})


@pytest.fixture(scope="module")
def fmt():
    from posttrain.models.tiny import build_tokenizer

    return ChatFormat(build_tokenizer())


def test_a_parsed_call_becomes_openai_tool_calls(fmt):
    msg, finish = fmt.reply_message('ok <tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}'
                                    '</tool_call>', [TOOL], None, "stop", "r:0")
    assert finish == "tool_calls" and msg["content"] == "ok"
    assert msg["tool_calls"][0]["function"] == {"name": "calculator", "arguments": '{"expression": "1+1"}'}


@pytest.mark.parametrize("text", ['<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
                                  '<tool_call>{"name": "calculator", "arguments": {"x": 1}}</tool_call>',
                                  "<tool_call>not json</tool_call>", "plain answer"])
def test_anything_but_a_valid_call_stays_content(fmt, text):
    msg, finish = fmt.reply_message(text, [TOOL], "auto", "stop", "r:0")
    assert finish == "stop" and msg == {"role": "assistant", "content": text}


def test_tool_choice_none_never_parses(fmt):
    text = '<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}</tool_call>'
    assert fmt.reply_message(text, [TOOL], "none", "stop", "r")[1] == "stop"


def _choice(raw):
    return ChatRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "q"}],
                                       "tool_choice": raw}).tool_choice


def test_forced_prefix_opens_the_call_and_names_the_function(fmt):
    from posttrain.rollout.agent.toolcall import format_tool_call

    assert fmt.forced_prefix([TOOL], None) == fmt.forced_prefix([TOOL], "auto") == ("", ())
    assert fmt.forced_prefix(None, "none") == ("", ())
    text, ids = fmt.forced_prefix([TOOL], "required")
    assert text == "<tool_call>" and ids == fmt.encode(text)
    text, ids = fmt.forced_prefix([TOOL], _choice({"type": "function", "function": {"name": "calculator"}}))
    assert format_tool_call("calculator", {"expression": "1"}).startswith(text)  # the canonical layout
    assert text == '<tool_call>{"name":"calculator","arguments":' and ids == fmt.encode(text)
    rest = '{"expression":"1"}}</tool_call>'  # what the model writes after it parses as that call
    msg, finish = fmt.reply_message(text + rest, [TOOL], "required", "stop", "r:0")
    assert finish == "tool_calls" and msg["tool_calls"][0]["function"]["name"] == "calculator"


@pytest.mark.parametrize("tools,choice", [([TOOL], {"type": "function", "function": {"name": "nope"}}),
                                          ([TOOL], {"type": "function", "function": {}}),
                                          (None, "required"),
                                          (None, {"type": "function", "function": {"name": "calculator"}})])
def test_a_tool_choice_that_cannot_apply_is_a_400(fmt, tools, choice):
    with pytest.raises(ApiError) as e:
        fmt.forced_prefix(tools, _choice(choice))
    assert e.value.status == 400 and e.value.param.startswith("tool_choice")
    assert e.value.body()["error"]["type"] == "invalid_request_error"


def test_stream_with_a_forced_prefix_holds_the_whole_call(fmt):
    s = TextStream(fmt, [], hold_tool=True, prefix="<tool_call>")
    assert s.push(fmt.encode('{"name":"calculator"')) == ""
    assert s.finish("<tool_call>garbage") == "<tool_call>garbage"  # a reply that did not parse: content, in full


def test_assistant_tool_calls_render_as_the_canonical_call_text(fmt):
    msgs = [ChatMessage.model_validate(m) for m in [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression":"2"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "2"}]]
    text = fmt.render(msgs, [TOOL])
    assert text == ('<|user|>q<|end|><|assistant|><tool_call>{"name":"calculator","arguments":{"expression":"2"}}'
                    '</tool_call><|end|><|tool|>2<|end|><|assistant|>')


def test_stream_holds_back_a_possible_stop_prefix(fmt):
    ids = fmt.encode("hello wor")
    s = TextStream(fmt, ["world"], hold_tool=False)
    assert s.push(ids) == "hello "  # "wor" may become "world"
    assert s.push(fmt.encode("k")) == "work"


def test_stream_holds_back_a_tool_call(fmt):
    s = TextStream(fmt, [], hold_tool=True)
    assert s.push(fmt.encode('hi <tool_call>{"name"')) == "hi "
    assert s.push(fmt.encode("}")) == ""


@pytest.mark.parametrize("body", [b"{", b"[]", b'{"model": "m", "messages": []}',
                                  b'{"model": "m", "messages": [{"role": "user"}], "temperature": 5}',
                                  b'{"model": "m", "messages": [{"role": "user"}], "stop": ["a","b","c","d","e"]}',
                                  b'{"model": "m", "messages": [{"role": "user"}], "n": 0}',
                                  b'{"model": "m", "messages": [{"role": "user"}], "top_p": NaN}',
                                  b"[" * 100000])
def test_malformed_chat_bodies_are_400s(body):
    with pytest.raises(ApiError) as e:
        parse(ChatRequest, body)
    assert e.value.status == 400 and e.value.body()["error"]["type"] == "invalid_request_error"


def test_completion_prompt_token_ids_must_be_non_negative():
    with pytest.raises(ApiError, match="prompt"):
        parse(CompletionRequest, b'{"model": "m", "prompt": [1, -2]}')
