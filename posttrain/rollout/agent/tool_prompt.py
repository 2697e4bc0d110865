"""How an episode's tools reach the model: the chat template's own tool rendering, or a listing.

    ids, mode = agent_prompt_ids(tok, task.prompt, tools, mode="auto", context=8192)

A model cannot call a tool nobody told it about. The modes (`agent.tools_prompt`, an eval
suite's `sampling.tools_prompt`):

- `template`: the tools go to `apply_chat_template(..., tools=[...])` as OpenAI function
  schemas, so a template that knows tools (Qwen, Llama 3.1, Hermes) renders them in the
  format its model was trained on. ValueError when the template ignores them.
- `text`: a listing appended to the system message (one is added when the task has none):
  one OpenAI function JSON per line inside `<tools></tools>`, then the call format, as
  Qwen's and Hermes' templates write it. For templates that render no tools (SmolLM2's).
- `none`: the task's prompt as it is. tau2 and BFCL prompts list their tools themselves
  (their loops do not come here); the tiny model's context cannot hold a listing.
- `auto` (the default): `template` when the template renders tools; else `text` when the
  listing takes at most half of what the episode may spend (`context`: its token budget, else
  the engine's `max_len`), since without it no call can succeed but past that it crowds out the
  episode itself; else `none` (the tiny model: 256 to 512 characters of context).

The tools are the ones the episode may call (`tools_for_task`: the task's own, `submit`,
the session built-ins), in that order, so the listing is the truth about what runs.
The same ids serve the RL episodes, the evals and the SFT demonstrations (`sft.py`), so a
warm-up trains on exactly the prompt the episodes show.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from posttrain.config_schema import TOOLS_PROMPT_MODES as MODES
from posttrain.rollout.prompting import encode_prompt, to_chat
from posttrain.types import Message

_PROBE = [{"role": "user", "content": "u"}]
_PROBE_TOOL = {"type": "function", "function": {"name": "pt_probe_tool", "description": "d",
                                                "parameters": {"type": "object", "properties": {}}}}

CALL_FORMAT = ("For each tool call, reply with one JSON object with the tool's name and arguments inside "
               "<tool_call></tool_call> tags, one call per reply and nothing after it:\n"
               '<tool_call>{"name": <tool-name>, "arguments": <args-json-object>}</tool_call>\n'
               "The tool's result comes back as the next message. A reply without a tool call is your final answer.")


def listing(tools: Mapping[str, Any]) -> str:
    """The `text` mode's block: the tools' schemas and the call format."""
    rows = "\n".join(json.dumps(t.openai_schema(), ensure_ascii=False) for t in tools.values())
    return f"# Tools\n\nYou may call these tools:\n<tools>\n{rows}\n</tools>\n\n{CALL_FORMAT}"


_RENDERS: dict[str, bool] = {}  # chat template text -> whether it renders tools


def template_renders_tools(tok: Any) -> bool:
    """Whether the chat template shows a `tools` argument at all (a template that ignores it renders the same)."""
    key = str(getattr(tok, "chat_template", None))
    if key not in _RENDERS:
        try:
            with_tools = tok.apply_chat_template(_PROBE, tools=[_PROBE_TOOL], tokenize=False, add_generation_prompt=True)
            plain = tok.apply_chat_template(_PROBE, tokenize=False, add_generation_prompt=True)
            _RENDERS[key] = with_tools != plain and "pt_probe_tool" in with_tools
        except Exception:  # noqa: BLE001  a template that raises on `tools` cannot render them
            _RENDERS[key] = False
    return _RENDERS[key]


def with_listing(messages: Sequence[Message], text: str) -> list[Message]:
    """`messages` with `text` appended to the first system message (one is put first when there is none)."""
    out = list(messages)
    for i, m in enumerate(out):
        if m.role == "system":
            out[i] = Message("system", f"{m.content}\n\n{text}" if m.content else text)
            return out
    return [Message("system", text), *out]


def resolve(tok: Any, tools: Mapping[str, Any], mode: str, context: int | None) -> str:
    """The concrete mode (`template`, `text` or `none`) that `mode` means for this tokenizer and context."""
    if mode not in MODES:
        raise ValueError(f"tools_prompt={mode!r}: expected one of {', '.join(MODES)}")
    if mode != "auto" or not tools:
        return mode if tools else "none"
    if template_renders_tools(tok):
        return "template"
    if context is None:
        return "text"
    size = len(tok(listing(tools), add_special_tokens=False)["input_ids"])
    return "text" if 2 * size <= context else "none"


def agent_prompt_ids(tok: Any, messages: Sequence[Message], tools: Mapping[str, Any], mode: str = "auto",
                     context: int | None = None) -> tuple[tuple[int, ...], str]:
    """The episode's prompt ids with its tools shown per `mode`, and the concrete mode used."""
    used = resolve(tok, tools, mode, context)
    if used == "none":
        return encode_prompt(tok, messages), used
    if used == "text":
        return encode_prompt(tok, with_listing(messages, listing(tools))), used
    if not template_renders_tools(tok):
        raise ValueError("tools_prompt=template: this tokenizer's chat template does not render tools; "
                         "use text (a listing in the system message) or auto")
    schemas = [t.openai_schema() for t in tools.values()]
    text = tok.apply_chat_template(to_chat(messages), tools=schemas, add_generation_prompt=True, tokenize=False)
    return tuple(tok(text, add_special_tokens=False)["input_ids"]), used
