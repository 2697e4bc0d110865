"""The proxy's prompt construction: earlier turns as exact ids, only new messages tokenised."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from posttrain.serve.capture import CapturedCall, EpisodeCapture, build_prompt, delta_ids
from posttrain.serve.chat import ChatFormat
from posttrain.serve.protocol import ChatMessage, ChatRequest


@pytest.fixture(scope="module")
def fmt():
    from posttrain.models.tiny import build_tokenizer

    return ChatFormat(build_tokenizer())


def _req(msgs):
    return ChatRequest.model_validate({"model": "m", "messages": msgs})


def _after_one_call(fmt, completion_text, eos=True):
    state = SimpleNamespace(fmt=fmt)
    ep = EpisodeCapture("e", None, {}, 10)
    first = [{"role": "user", "content": "What is 2*3?"}]
    prompt, reused, rerendered = build_prompt(state, ep, _req(first))
    comp = fmt.encode(completion_text) + ((fmt.tok.eos_token_id,) if eos else ())
    ep.calls.append(CapturedCall(prompt, comp, (0.0,) * len(comp), 0, "stop", {}, reused, rerendered, 0.0))
    ep.history = [("user", "What is 2*3?", ()), ("assistant", completion_text, ())]
    return state, ep, first, prompt, comp


def test_a_continued_call_reuses_the_generated_ids_verbatim(fmt):
    state, ep, first, prompt, comp = _after_one_call(fmt, "six")
    nxt = first + [{"role": "assistant", "content": "six"}, {"role": "user", "content": "sure?"}]
    ids, reused, rerendered = build_prompt(state, ep, _req(nxt))
    assert ids[: len(prompt) + len(comp)] == prompt + comp and reused == len(prompt) + len(comp)
    assert not rerendered
    assert fmt.tok.decode(list(ids[reused:]), skip_special_tokens=False) == "<|user|>sure?<|end|><|assistant|>"


def test_a_reply_cut_without_eos_gets_the_eos_before_the_next_message(fmt):
    state, ep, first, prompt, comp = _after_one_call(fmt, "si", eos=False)
    ids, reused, _ = build_prompt(state, ep, _req(first + [{"role": "assistant", "content": "si"},
                                                           {"role": "tool", "content": "6"}]))
    assert fmt.tok.decode(list(ids[reused:]), skip_special_tokens=False) == "<|end|><|tool|>6<|end|><|assistant|>"


def test_a_rewritten_history_is_rendered_from_scratch_and_flagged(fmt):
    state, ep, first, _, _ = _after_one_call(fmt, "six")
    edited = [{"role": "user", "content": "What is 3*3?"}, {"role": "assistant", "content": "six"},
              {"role": "user", "content": "again"}]
    ids, reused, rerendered = build_prompt(state, ep, _req(edited))
    assert rerendered and reused == 0
    assert ids == fmt.prompt_ids([ChatMessage.model_validate(m) for m in edited], None)


def test_delta_of_a_tool_message_matches_the_full_rendering(fmt):
    msgs = [ChatMessage(role="user", content="q"), ChatMessage(role="assistant", content="a")]
    full = fmt.prompt_ids(msgs + [ChatMessage(role="tool", content="out")], None)
    head = fmt.encode(fmt.render(msgs, None, generation=False))
    assert head + delta_ids(fmt, [ChatMessage(role="tool", content="out")], None, True) == full
