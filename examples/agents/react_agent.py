"""A small ReAct agent on the official `openai` client: think, call a tool, observe, answer.

    posttrain serve tiny &                       # or: agent.external in an RL run (docs/serve.md)
    OPENAI_BASE_URL=... POSTTRAIN_TOOLS_URL=... python examples/agents/react_agent.py < task.json

It reads the task (`{"messages", "tools", "max_steps", ...}`) from stdin, or from
$POSTTRAIN_TASK when stdin is empty, and loops: ask the model with the task's tools; a
reply with `tool_calls` runs the call at $POSTTRAIN_TOOLS_URL/{name} (the episode's own
tool state and, for terminal tasks, its sandbox session) and appends the observation as
a `tool` message; a plain reply is the final answer, printed, and the agent exits.

Terminal tasks (the task's tools include `shell`): the model's `shell` calls run in the
episode's sandbox session through the same URL (cwd, env and files persist between
them; the observation is the command's output, `[exit N]` appended when it failed), and
the episode ends with `submit`: the model's own `submit` call, or the agent's after a
plain reply, so the workspace is checked as the model left it. A sandbox that died
(HTTP 503) ends the agent with exit code 1. Under RL the proxy records every call's
tokens; this script needs nothing from posttrain.
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
    if r.status_code == 503:  # the episode's sandbox died: nothing more can run (the run records an infra error)
        sys.exit(f"sandbox failed: {r.text}")
    if r.status_code != 200:
        return f"error: {r.json().get('error', {}).get('message', r.text)}"
    return r.json()["output"]


def tool_names(task: dict) -> set[str]:
    return {t["function"]["name"] for t in task.get("tools", [])}


def main() -> None:
    task = load_task()
    client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL / OPENAI_API_KEY from the environment
    model = os.environ.get("POSTTRAIN_MODEL", "default")
    tools_url = os.environ["POSTTRAIN_TOOLS_URL"]
    terminal = "shell" in tool_names(task)  # a terminal task: shell steps in the sandbox session, then submit
    messages: list[dict] = list(task["messages"])
    for _ in range(task.get("max_steps", 8)):
        reply = client.chat.completions.create(model=model, messages=messages, tools=task["tools"],
                                               max_tokens=task.get("max_new_tokens", 256))
        msg = reply.choices[0].message
        if not msg.tool_calls:
            print(msg.content or "")
            if terminal:  # done: the workspace is final as the model left it
                run_tool(tools_url, "submit", "{}")
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
