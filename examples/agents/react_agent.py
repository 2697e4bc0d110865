"""A small ReAct agent on the official `openai` client: think, call a tool, observe, answer.

    posttrain serve tiny &                       # or: agent.external in an RL run (docs/serve.md)
    OPENAI_BASE_URL=... POSTTRAIN_TOOLS_URL=... python examples/agents/react_agent.py < task.json

It reads the task (`{"messages", "tools", "max_steps", ...}`) from stdin, or from
$POSTTRAIN_TASK when stdin is empty, and loops: ask the model with the task's tools; a
reply with `tool_calls` runs the call at $POSTTRAIN_TOOLS_URL/{name} (the episode's own
tool state and, for terminal tasks, its sandbox session) and appends the observation as
a `tool` message; a plain reply is the final answer, printed, and the agent exits. Under
RL the proxy records every call's tokens; this script needs nothing from posttrain.
"""

from __future__ import annotations

import json
import os
import sys

import httpx
import openai


def load_task() -> dict:
    raw = "" if sys.stdin.isatty() else sys.stdin.read()
    return json.loads(raw or os.environ["POSTTRAIN_TASK"])


def run_tool(tools_url: str, name: str, arguments: str) -> str:
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as e:
        return f"error: arguments are not JSON: {e}"
    r = httpx.post(f"{tools_url}/{name}", json=args, timeout=120)
    if r.status_code != 200:
        return f"error: {r.json().get('error', {}).get('message', r.text)}"
    return r.json()["output"]


def main() -> None:
    task = load_task()
    client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL / OPENAI_API_KEY from the environment
    model = os.environ.get("POSTTRAIN_MODEL", "default")
    tools_url = os.environ["POSTTRAIN_TOOLS_URL"]
    messages: list[dict] = list(task["messages"])
    for _ in range(task.get("max_steps", 8)):
        reply = client.chat.completions.create(model=model, messages=messages, tools=task["tools"],
                                               max_tokens=task.get("max_new_tokens", 256))
        msg = reply.choices[0].message
        if not msg.tool_calls:
            print(msg.content or "")
            return
        call = msg.tool_calls[0]
        messages.append({"role": "assistant", "content": msg.content,
                         "tool_calls": [{"id": call.id, "type": "function",
                                         "function": {"name": call.function.name,
                                                      "arguments": call.function.arguments}}]})
        if call.function.name == "submit":
            run_tool(tools_url, "submit", "{}")
            return
        obs = run_tool(tools_url, call.function.name, call.function.arguments)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": obs})
    print("step budget spent", file=sys.stderr)


if __name__ == "__main__":
    main()
