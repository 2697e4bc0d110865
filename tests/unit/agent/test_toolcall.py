"""The strict tool-call parser: each failure has its own reason; a plain reply is an answer."""

import pytest

from posttrain.rollout.agent.toolcall import ToolCallError, format_tool_call, parse_tool_call

SCHEMAS = {
    "calculator": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"],
                   "additionalProperties": False},
    "submit": {"type": "object", "properties": {}, "additionalProperties": False},
}


def reason(text):
    with pytest.raises(ToolCallError) as e:
        parse_tool_call(text, SCHEMAS)
    return e.value.reason


def test_plain_reply_is_not_a_call():
    assert parse_tool_call("The answer is 42.", SCHEMAS) is None


def test_well_formed_call_parses_to_name_and_arguments():
    call = parse_tool_call('<tool_call>{"name": "calculator", "arguments": {"expression": "2*3"}}</tool_call>', SCHEMAS)
    assert (call.name, dict(call.arguments)) == ("calculator", {"expression": "2*3"})


def test_text_before_the_call_and_whitespace_after_are_allowed():
    call = parse_tool_call('let me compute <tool_call>{"name":"submit","arguments":{}}</tool_call>\n ', SCHEMAS)
    assert call.name == "submit"


def test_openai_wire_form_arguments_string_is_accepted():
    call = parse_tool_call('<tool_call>{"name":"calculator","arguments":"{\\"expression\\": \\"1+1\\"}"}</tool_call>', SCHEMAS)
    assert call.arguments["expression"] == "1+1"


def test_not_json():
    assert reason('<tool_call>{"name": "calculator", "arguments": {</tool_call>') == "not_json"


def test_unknown_tool_names_the_available_ones():
    with pytest.raises(ToolCallError) as e:
        parse_tool_call('<tool_call>{"name":"calc","arguments":{}}</tool_call>', SCHEMAS)
    assert e.value.reason == "unknown_tool" and "calculator" in str(e.value)


def test_arguments_not_matching_the_schema():
    assert reason('<tool_call>{"name":"calculator","arguments":{"expression": 5}}</tool_call>') == "bad_arguments"
    assert reason('<tool_call>{"name":"calculator","arguments":{}}</tool_call>') == "bad_arguments"
    assert reason('<tool_call>{"name":"submit","arguments":{"x": 1}}</tool_call>') == "bad_arguments"


def test_wrong_shape():
    assert reason('<tool_call>[1, 2]</tool_call>') == "bad_shape"
    assert reason('<tool_call>{"tool":"submit","arguments":{}}</tool_call>') == "bad_shape"
    assert reason('<tool_call>{"name":"submit","arguments":[1]}</tool_call>') == "bad_shape"


def test_unterminated_multiple_and_trailing_text():
    assert reason('<tool_call>{"name":"submit","arguments":{}}') == "unterminated"
    assert reason('{"name":"submit"}</tool_call>') == "unterminated"
    two = '<tool_call>{"name":"submit","arguments":{}}</tool_call>'
    assert reason(two + two) == "multiple_calls"
    assert reason(two + " and then the answer is 4") == "trailing_text"


def test_format_round_trips():
    text = format_tool_call("calculator", {"expression": "4821*937"})
    assert dict(parse_tool_call(text, SCHEMAS).arguments) == {"expression": "4821*937"}
