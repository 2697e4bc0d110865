"""How an episode's tools reach the model (rollout/agent/tool_prompt.py): listing, template, none, auto."""

from __future__ import annotations

import json

import pytest

from tests.unit.agent.conftest import ScriptedEngine, calc_task, run

from posttrain.rollout.agent.loop import AgentOptions, rollout_agent
from posttrain.rollout.agent.tool_prompt import agent_prompt_ids, listing, resolve
from posttrain.rollout.agent.tools import tools_for_task
from posttrain.types import Message

# A ChatML-like template that renders `tools` as Qwen's does (names in a system block).
TOOL_TEMPLATE = (
    "{% if tools %}<|system|>tools:{% for t in tools %} {{ t['function']['name'] }}{% endfor %}<|end|>{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def _tiny(template: str | None = None):
    from posttrain.models.tiny import build_tokenizer

    tok = build_tokenizer()
    if template is not None:
        tok.chat_template = template
    return tok


def _text(tok, ids) -> str:
    return tok.decode(list(ids), skip_special_tokens=False)


def test_listing_names_every_tool_the_episode_may_call_with_its_schema():
    tools = tools_for_task(calc_task())
    rows = [json.loads(line) for line in listing(tools).split("<tools>\n")[1].split("\n</tools>")[0].splitlines()]
    assert [r["function"]["name"] for r in rows] == ["calculator", "submit"]
    assert rows[0]["function"]["parameters"] == dict(tools["calculator"].schema)


def test_text_mode_appends_the_listing_to_the_tasks_own_system_message():
    tok, task = _tiny(), calc_task()
    msgs = (Message("system", "Be brief."), *task.prompt)
    text = _text(tok, agent_prompt_ids(tok, msgs, tools_for_task(task), "text")[0])
    assert text.startswith("<|system|>Be brief.\n\n# Tools") and text.count("<|system|>") == 1
    assert '"name": "calculator"' in text and "<tool_call>{\"name\": <tool-name>" in text
    assert text.endswith("<|user|>What is 4821 * 937?<|end|><|assistant|>")


def test_text_mode_adds_a_system_message_when_the_task_has_none():
    tok, task = _tiny(), calc_task()
    text = _text(tok, agent_prompt_ids(tok, task.prompt, tools_for_task(task), "text")[0])
    assert text.startswith("<|system|># Tools")


def test_template_mode_hands_the_schemas_to_a_template_that_renders_tools():
    tok, task = _tiny(TOOL_TEMPLATE), calc_task()
    ids, used = agent_prompt_ids(tok, task.prompt, tools_for_task(task), "template")
    assert used == "template" and _text(tok, ids).startswith("<|system|>tools: calculator submit<|end|><|user|>")


def test_template_mode_refuses_a_template_that_ignores_tools():
    tok, task = _tiny(), calc_task()
    with pytest.raises(ValueError, match="does not render tools"):
        agent_prompt_ids(tok, task.prompt, tools_for_task(task), "template")


def test_none_mode_is_the_tasks_prompt_unchanged():
    from posttrain.rollout.prompting import encode_prompt

    tok, task = _tiny(), calc_task()
    assert agent_prompt_ids(tok, task.prompt, tools_for_task(task), "none") == (encode_prompt(tok, task.prompt), "none")


def test_auto_prefers_the_templates_own_rendering():
    assert resolve(_tiny(TOOL_TEMPLATE), tools_for_task(calc_task()), "auto", 256) == "template"


def test_auto_lists_the_tools_when_the_listing_fits_half_the_budget():
    tok, tools = _tiny(), tools_for_task(calc_task())
    size = len(tok(listing(tools), add_special_tokens=False)["input_ids"])
    assert resolve(tok, tools, "auto", 2 * size) == "text"
    assert resolve(tok, tools, "auto", 2 * size - 1) == "none"  # the tiny model's 256-512-character context


def test_unknown_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="tools_prompt='yaml'"):
        resolve(_tiny(), tools_for_task(calc_task()), "yaml", None)


def test_episode_prompt_shows_the_tools_and_a_tight_budget_leaves_them_out():
    tok = _tiny()

    def answer(text):
        return "The answer is 4517277."

    wide = run(rollout_agent(ScriptedEngine(tok, answer), tok, [calc_task()], AgentOptions()))[0]
    tight = run(rollout_agent(ScriptedEngine(tok, answer), tok, [calc_task()], AgentOptions(token_budget=300)))[0]
    assert '"name": "calculator"' in _text(tok, wide.prompt_ids)
    assert '"name": "calculator"' not in _text(tok, tight.prompt_ids) and tight.verify.status == "ok"


def test_sft_demonstration_prompt_is_the_episode_prompt():
    from posttrain.rollout.agent.render import ChatCodec
    from posttrain.rollout.agent.sft import plan_demonstration
    from posttrain.tasks.plan import dump_plan
    import dataclasses

    tok = _tiny()
    task = dataclasses.replace(calc_task(), oracle=dump_plan([
        {"tool": "calculator", "arguments": {"expression": "4821*937"}}, {"answer": "The answer is 4517277."}]))
    seen = []

    def spy(text):
        seen.append(text)
        return "The answer is 4517277."

    run(rollout_agent(ScriptedEngine(tok, spy), tok, [task], AgentOptions()))
    prompt, segments = run(plan_demonstration(ChatCodec(tok), tok, task, context=4096))
    assert _text(tok, prompt) == seen[0]
    assert _text(tok, segments[0][0]).startswith('<tool_call>{"name":"calculator"')
