"""The proxy's fast paths give exactly what the paths they short-cut give: token ids, template text, bodies."""

from __future__ import annotations

import random

import pytest

from posttrain.serve.chat import ChatFormat
from posttrain.serve.protocol import ApiError, ChatMessage, ChatRequest, ToolSpec, parse, parse_slow
from tests.integration.test_serve_errors import _mutations
from tests.unit.rollout.chat_fixtures import bpe_chat_tokenizer, real_smollm2_dir

TOOLS = [ToolSpec.model_validate({"type": "function", "function": {
    "name": "calculator", "description": "Evaluate arithmetic.", "parameters": {
        "type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}})]


def _tiny():
    from posttrain.models.tiny import build_tokenizer

    return build_tokenizer()


def _smollm2():
    d = real_smollm2_dir()
    if d is None:
        pytest.skip("no converted SmolLM2 (models/smollm2)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(d)


@pytest.fixture(scope="module", params=["tiny", "bpe_chatml", "smollm2"])
def tok(request):
    return {"tiny": _tiny, "bpe_chatml": bpe_chat_tokenizer, "smollm2": _smollm2}[request.param]()


def _texts(tok, n=400):
    rng = random.Random(0)
    specials = [t for t in (tok.eos_token, tok.bos_token, tok.pad_token, "<tool_call>", "</tool_call>") if t]
    pieces = ["a", "b", " ", "  ", "\n", "\t", "é", "→", "😀", "{", "}", '"', "42", "hello", "The", ":", *specials]
    return [""] + ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 30))) for _ in range(n)]


def _conversations():
    call = {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "2*3"}'}}
    return [[ChatMessage.model_validate(m) for m in conv] for conv in (
        [{"role": "user", "content": "What is 2*3?"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  spaced \n"}],
        [{"role": "developer", "content": "d"}, {"role": "user", "content": [{"type": "text", "text": "parts"}]}],
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [call]},
         {"role": "tool", "tool_call_id": "c1", "content": "6"}, {"role": "assistant", "content": "It is 6."},
         {"role": "user", "content": "thanks"}])]


def test_the_fast_paths_are_taken_and_encode_exactly_as_the_tokenizer(tok):
    fmt = ChatFormat(tok)
    assert fmt._direct is not None and fmt._template[1] is not None  # else this test would check nothing
    for text in _texts(tok):
        assert fmt.encode(text) == tuple(tok(text, add_special_tokens=False)["input_ids"]), text


def test_the_direct_render_is_apply_chat_templates_text(tok):
    fmt = ChatFormat(tok)
    for msgs in _conversations():
        for tools in (None, TOOLS):
            for generation in (False, True):
                kw = {"tools": [t.model_dump() for t in tools]} if tools else {}
                want = tok.apply_chat_template(fmt.template_messages(msgs), add_generation_prompt=generation,
                                               tokenize=False, **kw)
                assert fmt.render(msgs, tools, generation) == want
                assert fmt.render_cached(msgs, tools, generation) == want


def test_encode_defers_to_the_tokenizer_when_the_backend_would_truncate():
    tok = bpe_chat_tokenizer()
    fmt = ChatFormat(tok)
    text = "Hello world, the answer is 42. " * 4
    full = tuple(tok(text, add_special_tokens=False)["input_ids"])
    tok._tokenizer.enable_truncation(max_length=3)  # left over by someone else's call
    assert fmt.encode(text) == full


def test_several_named_templates_go_through_apply_chat_template():
    from tests.unit.rollout.chat_fixtures import CHATML

    tok = bpe_chat_tokenizer()
    tok.chat_template = {"default": CHATML, "tool_use": CHATML.replace("<|im_start|>", "<|im_start|>T:")}
    fmt = ChatFormat(tok)
    assert fmt._template[1] is None  # which one applies depends on the call: transformers chooses
    msgs = _conversations()[0]
    assert fmt.render(msgs, TOOLS).startswith("<|im_start|>T:user") and fmt.render(msgs, None).startswith(
        "<|im_start|>user")


def test_a_template_set_after_the_format_was_built_is_the_one_rendered():
    tok = bpe_chat_tokenizer()
    fmt = ChatFormat(tok)
    tok.chat_template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    assert fmt.render(_conversations()[0], None) == "[user] What is 2*3?\n"


def _slow_parse(raw: bytes):
    """The body parser before its fast path: json.loads, then the model's validation."""
    return parse_slow(ChatRequest, raw)


def _outcome(fn, raw):
    try:
        return "ok", fn(raw).model_dump()
    except ApiError as e:
        return "error", (e.status, e.message, e.param)


def test_parse_gives_what_json_loads_and_validation_give():
    bodies = _mutations(random.Random(1), 400) + [
        b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800 lone"}]}',  # json.loads takes it
        b'\xef\xbb\xbf{"model": "m", "messages": [{"role": "user", "content": "bom"}]}',
        '{"model": "m", "messages": [{"role": "user", "content": "x"}]}'.encode("utf-16"),
        b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}',
        b'{"model": "m", "model": "n", "messages": [{"role": "user", "content": "x"}], "seed": 99999999999999999999}']
    oks = 0
    for raw in bodies:
        got = _outcome(lambda r: parse(ChatRequest, r), raw)
        assert got == _outcome(_slow_parse, raw), raw[:80]
        oks += got[0] == "ok"
    assert 20 < oks < len(bodies) - 100  # both outcomes exercised
