"""OpenAI chat messages <-> token ids, and OpenAI `tool_calls` <-> the project's tool-call text.

    fmt = ChatFormat(tokenizer)
    ids = fmt.prompt_ids(req.messages, req.tools)     # the chat template, applied once
    msg, finish = fmt.reply_message(text, req.tools, "stop", call_id)   # tool_calls parsed

An assistant message with `tool_calls` is rendered as the project's canonical call text
(`<tool_call>{"name":..,"arguments":{..}}</tool_call>`, toolcall.py) so the model sees
its own format; `tool` messages keep the role `tool`. The `tools` list goes to the
template as `tools=` (templates without tool support ignore it: the model then knows the
tools only from the conversation, as in the native agent loop). A reply that parses as a
call to one of the request's tools becomes `tool_calls` with finish_reason "tool_calls";
a malformed call stays plain content (the model's text, unchanged).

`tool_choice` is enforced as servers do for a model that writes calls as text: the reply
is made to start with the call's opening, `<tool_call>` ("required") or
`<tool_call>{"name":"X","arguments":` (a named function), whose ids are appended to the
prompt (`forced_prefix`); the model writes the rest, and the prefix is put back in front
of the generated text before it is parsed. The prefix ids are prompt tokens (the engine's
prompt, the proxy's captured prompt ids, `usage.prompt_tokens`): they were not sampled
and have no logprobs. A reply that still does not parse (cut by max_tokens, garbage
arguments) is returned as content, prefix included.

Limits: one call per reply (the project's strict format); content parts other than text
are refused by the protocol.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

from posttrain.rollout.agent.toolcall import OPEN, ToolCallError, format_tool_call, parse_tool_call
from posttrain.serve.protocol import ApiError, ChatMessage, ToolSpec


def cut_stop(text: str, stops: Sequence[str]) -> str:
    cuts = [text.index(s) for s in stops if s in text]
    return text[: min(cuts)] if cuts else text


def call_id(seed: str) -> str:
    return "call_" + hashlib.blake2b(seed.encode(), digest_size=12).hexdigest()


class ChatFormat:
    def __init__(self, tokenizer: Any, stop_ids: Any = ()) -> None:
        self.tok = tokenizer
        self.stop_ids = {i for i in (tokenizer.eos_token_id, *stop_ids) if i is not None}  # the engine's end-of-turn ids
        self.skip = self.stop_ids | ({tokenizer.pad_token_id} if tokenizer.pad_token_id is not None else set())
        self.renders: dict[tuple, str] = {}  # render_cached's memo: fixed conversations (the proxy's probe)
        # the fast paths, used while the tokenizer keeps the backend and template they were checked against
        self._direct = _direct_encoder(tokenizer)
        self._template = (getattr(tokenizer, "chat_template", None), _direct_template(tokenizer))
        self._split_special = bool(getattr(tokenizer, "split_special_tokens", False))

    # ---- requests -> ids ------------------------------------------------------------------
    def template_messages(self, msgs: Sequence[ChatMessage]) -> list[dict[str, str]]:
        out = []
        for m in msgs:
            role = "system" if m.role == "developer" else m.role
            text = m.text()
            if m.role == "assistant" and m.tool_calls:
                text += "".join(format_tool_call(c.function.name, _args(c.function.arguments)) for c in m.tool_calls)
            out.append({"role": role, "content": text})
        return out

    def tool_dicts(self, tools: Sequence[ToolSpec] | None) -> list[dict[str, Any]] | None:
        """The tools as the template sees them (plain JSON values)."""
        return [t.model_dump() for t in tools] if tools else None

    def render(self, msgs: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None, generation: bool = True,
               plain: list[dict[str, Any]] | None = None) -> str:
        """The chat template's text; `plain`: `tool_dicts(tools)` when the caller has it already."""
        if getattr(self.tok, "chat_template", None) is None:
            raise ApiError(400, "this model has no chat template: use /v1/completions", code="no_chat_template")
        plain = self.tool_dicts(tools) if plain is None else plain
        try:
            src, compiled = self._template  # what apply_chat_template renders, without its layers (_direct_template)
            if compiled is not None and self.tok.chat_template is src:
                return compiled.render(messages=self.template_messages(msgs), tools=plain or None, documents=None,
                                       add_generation_prompt=generation, **self.tok.special_tokens_map)
            return self.tok.apply_chat_template(self.template_messages(msgs), add_generation_prompt=generation,
                                                tokenize=False, **({"tools": plain} if plain else {}))
        except Exception as e:  # noqa: BLE001  a template that rejects the conversation (role order...)
            raise ApiError(400, f"the chat template rejected the messages: {type(e).__name__}: {e}") from None

    def render_cached(self, msgs: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None,
                      generation: bool = True, name: str | None = None,
                      plain: list[dict[str, Any]] | None = None) -> str:
        """`render`, memoised on the messages and tools: for a conversation rendered on every call. `name`, when
        given, stands for the messages in the memo's key (a fixed conversation: no need to serialise it)."""
        plain = self.tool_dicts(tools) if plain is None else plain
        key = (name or tuple(m.model_dump_json() for m in msgs), repr(plain), generation)  # repr: JSON values
        if key not in self.renders:
            if len(self.renders) > 256:
                self.renders.clear()
            self.renders[key] = self.render(msgs, tools, generation, plain)
        return self.renders[key]

    def encode(self, text: str) -> tuple[int, ...]:
        bt = self._direct
        if bt is not None and self.tok._tokenizer is bt and bt.truncation is None and bt.padding is None and \
                bt.encode_special_tokens == self._split_special:
            return tuple(bt.encode(text, add_special_tokens=False).ids)
        return tuple(self.tok(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, msgs: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None) -> tuple[int, ...]:
        return self.encode(self.render(msgs, tools))

    def forced_prefix(self, tools: Sequence[ToolSpec] | None, tool_choice: Any) -> tuple[str, tuple[int, ...]]:
        """(text, ids) every reply must start with under `tool_choice`: nothing for none/auto, the call's
        opening for "required", the opening and the name for a named function; 400 when it cannot apply."""
        if tool_choice is None or tool_choice in ("none", "auto"):
            return "", ()
        names = [t.function.name for t in tools or ()]
        if not names:
            raise ApiError(400, "invalid value for tool_choice: a tool_choice other than 'none' or 'auto' needs "
                                "'tools'", param="tool_choice", code="invalid_value")
        if tool_choice == "required":
            text = OPEN
        else:  # protocol.NamedTool
            name = tool_choice.function.get("name")
            if not name:
                raise ApiError(400, "invalid value for tool_choice: function.name is required",
                               param="tool_choice.function.name", code="invalid_value")
            if name not in names:
                raise ApiError(400, f"invalid value for tool_choice: function {name!r} is not in tools "
                                    f"({', '.join(names)})", param="tool_choice", code="invalid_value")
            body = json.dumps({"name": name}, separators=(",", ":"), ensure_ascii=False)
            text = f'{OPEN}{body[:-1]},"arguments":'  # format_tool_call's canonical layout, cut before the arguments
        return text, self.encode(text)

    # ---- ids -> replies -------------------------------------------------------------------
    def reply_text(self, ids: Sequence[int]) -> str:
        """The reply with tool-call markers kept (special tokens other than EOS/pad)."""
        return self.tok.decode([t for t in ids if t not in self.skip], skip_special_tokens=False)

    def token_text(self, t: int) -> str:
        return self.tok.decode([t], skip_special_tokens=False)

    def reply_message(self, text: str, tools: Sequence[ToolSpec] | None, tool_choice: Any, finish: str,
                      seed: str) -> tuple[dict[str, Any], str]:
        """The assistant message of `text` and its finish_reason (OpenAI's names)."""
        finish = "length" if finish == "length" else "stop"
        call = None
        if tools and tool_choice != "none" and finish == "stop":
            try:
                call = parse_tool_call(text, {t.function.name: t.function.parameters for t in tools})
            except ToolCallError:
                call = None
        if call is None:
            return {"role": "assistant", "content": text}, finish
        before = text[: text.find(OPEN)].strip()
        tc = {"id": call_id(seed), "type": "function",
              "function": {"name": call.name, "arguments": json.dumps(plain(call.arguments), ensure_ascii=False)}}
        return {"role": "assistant", "content": before or None, "tool_calls": [tc]}, "tool_calls"


# transformers' own modules: a tokenizer class that overrides none of the encoding path with code of its own
_TRANSFORMERS = {"transformers.tokenization_utils_base", "transformers.tokenization_utils_fast",
                 "transformers.tokenization_utils_tokenizers"}
_ENCODE_PATH = ("__call__", "_call_one", "encode_plus", "_encode_plus", "_batch_encode_plus", "_convert_encoding",
                "set_truncation_and_padding", "_switch_to_input_mode", "prepare_for_tokenization")
_PROBES = ("hi", " two  words\n", "caf\u00e9 \u2192 \U0001f600", "<tool_call>{\"a\": 1}</tool_call>")


def _direct_encoder(tok: Any) -> Any:
    """The Rust tokenizer behind `tok` when `tok(text, add_special_tokens=False)["input_ids"]` is its own
    `encode(text, add_special_tokens=False).ids` (None otherwise). transformers' Python layers around that
    call cost 40-70 us (several times that on a busy host), and the proxy encodes every call's new
    messages; `encode` still checks, per call, the backend settings transformers would reset."""
    bt = getattr(tok, "_tokenizer", None)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    if not isinstance(bt, Tokenizer) or not hasattr(bt, "encode_special_tokens"):
        return None
    for name in _ENCODE_PATH:
        fn = getattr(type(tok), name, None)
        if fn is not None and getattr(fn, "__module__", None) not in _TRANSFORMERS:
            return None
    specials = [t for t in (tok.eos_token, tok.pad_token, tok.bos_token) if isinstance(t, str)]
    try:
        for text in _PROBES + tuple(f"a{t}b {t}" for t in specials):
            if bt.encode(text, add_special_tokens=False).ids != list(tok(text, add_special_tokens=False)["input_ids"]):
                return None
    except Exception:  # noqa: BLE001  a tokenizer this cannot drive: the ordinary call it is
        return None
    return bt


def _direct_template(tok: Any) -> Any:
    """The compiled chat template, when rendering it with the variables apply_chat_template gives it
    (messages, tools, documents, add_generation_prompt, the special tokens) yields apply_chat_template's
    text on probe conversations (None otherwise, or for a tokenizer with several named templates). The
    layers around the render (copying and checking every message and tool) cost 3-4 times the render
    itself, and the proxy renders on every call."""
    template = getattr(tok, "chat_template", None)
    if not isinstance(template, str):
        return None
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template

        compiled = _compile_jinja_template(template)
        tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {
            "type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}}]
        call = f'{OPEN}{{"name":"f","arguments":{{"x":"1"}}}}</tool_call>'
        for msgs in ([{"role": "user", "content": "hi"}],
                     [{"role": "system", "content": "s"}, {"role": "user", "content": " u\n"},
                      {"role": "assistant", "content": "a " + call}, {"role": "tool", "content": "1"}]):
            for tl in (None, tools):
                for gen in (False, True):
                    want = tok.apply_chat_template(msgs, add_generation_prompt=gen, tokenize=False,
                                                   **({"tools": tl} if tl else {}))
                    got = compiled.render(messages=msgs, tools=tl, documents=None, add_generation_prompt=gen,
                                          **tok.special_tokens_map)
                    if got != want:
                        return None
    except Exception:  # noqa: BLE001  any doubt: apply_chat_template it is
        return None
    return compiled


def plain(obj: Any) -> Any:
    """JSON-ready copy of a frozen value (ToolCall.arguments holds mappingproxies and tuples)."""
    if isinstance(obj, Mapping):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def _args(arguments: str) -> dict[str, Any]:
    try:
        val = json.loads(arguments)
    except json.JSONDecodeError:
        raise ApiError(400, f"tool_calls arguments must be a JSON object string, got {arguments[:40]!r}",
                       param="messages") from None
    if not isinstance(val, dict):
        raise ApiError(400, "tool_calls arguments must encode a JSON object", param="messages")
    return val


class TextStream:
    """Incremental text of a growing reply for SSE: holds back what a later token may change
    (a partial UTF-8 character, a possible stop-string prefix, a tool call being written)."""

    def __init__(self, fmt: ChatFormat, stops: Sequence[str], hold_tool: bool, prefix: str = "") -> None:
        self.fmt, self.stops, self.hold_tool, self.prefix = fmt, tuple(stops), hold_tool, prefix
        self.ids: list[int] = []
        self.sent = 0

    def push(self, ids: Sequence[int]) -> str:
        self.ids.extend(ids)
        text = self.prefix + cut_stop(self.fmt.reply_text(self.ids), self.stops)
        limit = len(text.rstrip("\ufffd"))
        for s in self.stops:
            for k in range(min(len(s) - 1, len(text)), 0, -1):
                if text.endswith(s[:k]):
                    limit = min(limit, len(text) - k)
                    break
        if self.hold_tool:
            at = text.find(OPEN)
            if at >= 0:
                limit = min(limit, at)
            else:
                for k in range(min(len(OPEN) - 1, len(text)), 0, -1):
                    if text.endswith(OPEN[:k]):
                        limit = min(limit, len(text) - k)
                        break
        return self._take(text, limit)

    def finish(self, final_text: str) -> str:
        """The rest of `final_text` (what the non-streamed reply says) not yet sent."""
        return self._take(final_text, len(final_text))

    def _take(self, text: str, limit: int) -> str:
        if limit <= self.sent:
            return ""
        out, self.sent = text[self.sent:limit], limit
        return out
