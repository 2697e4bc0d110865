"""Multi-turn demonstrations from oracle action plans, and a short SFT warm-up on them.

    demos = await plan_demonstrations(tokenizer, tasks)         # real tool observations
    losses = sft_on_demonstrations(model, tokenizer, demos, steps=300)   # posttrain/train/agent_sft.py

A plan step `{"tool", "arguments"}` becomes the assistant turn the agent loop expects
(`<tool_call>{"name", "arguments"}</tool_call>` then EOS), followed by the observation
the real tool returns, rendered exactly as the loop renders it (mask 0); the final
`{"answer"}` step is a plain reply. So the warm-up teaches the call format and the
conversation framing the RL episodes will see, token for token: the prompt shows the tools
as the episodes do (`tools_prompt` and `context`, tool_prompt.py). Tasks whose tools need
a sandbox session are skipped unless `sandbox` is given.

Limits: plans are replayed once (observations are fixed); a plan longer than the
context is dropped rather than cut.
"""

from __future__ import annotations

from typing import Any, Sequence

from posttrain.rollout.agent.render import ChatCodec, truncate
from posttrain.rollout.agent.toolcall import format_tool_call
from posttrain.types import Task

Segment = tuple[tuple[int, ...], tuple[float, ...], bool]
Demo = tuple[tuple[int, ...], list[Segment]]


async def plan_demonstration(codec: ChatCodec, tok: Any, task: Task, obs_max_chars: int = 2000,
                             session: Any = None, tools_prompt: str = "auto", context: int | None = None) -> Demo:
    from posttrain.rollout.agent.tool_prompt import agent_prompt_ids
    from posttrain.rollout.agent.tools import execute, tools_for_task
    from posttrain.tasks.plan import parse_plan
    from posttrain.tasks.tools_impl import init_state

    tools = tools_for_task(task)
    state = init_state(task)
    if session is not None:
        state["session"] = session
    segments: list[Segment] = []
    for step in parse_plan(task.oracle or ""):
        if "answer" in step:
            segments.append((codec.assistant_ids(str(step["answer"])), (), True))
            break
        name, args = str(step["tool"]), dict(step.get("arguments", {}))
        segments.append((codec.assistant_ids(format_tool_call(name, args)), (), True))
        obs = await execute(tools[name], args, state)
        segments.append((codec.observation_ids(truncate(obs.text, obs_max_chars), True), (), False))
    return agent_prompt_ids(tok, task.prompt, tools, tools_prompt, context)[0], segments


async def plan_demonstrations(tok: Any, tasks: Sequence[Task], max_len: int | None = None, sandbox: Any = None,
                              tools_prompt: str = "auto", context: int | None = None) -> list[Demo]:
    """One demonstration per task with a plan (dropped when longer than `max_len`); `context` (the
    model's) decides `tools_prompt: auto` as the episodes' engine does."""
    from posttrain.rollout.agent.tools import needs_session

    codec = ChatCodec(tok)
    demos = []
    for t in tasks:
        if t.oracle is None:
            continue
        if needs_session(t):
            if sandbox is None:
                continue
            from posttrain.tasks.terminal import open_task_session

            async with open_task_session(sandbox, t) as s:
                d = await plan_demonstration(codec, tok, t, session=s, tools_prompt=tools_prompt, context=context)
        else:
            d = await plan_demonstration(codec, tok, t, tools_prompt=tools_prompt, context=context)
        if max_len is None or len(d[0]) + sum(len(s[0]) for s in d[1]) <= max_len:
            demos.append(d)
    return demos
