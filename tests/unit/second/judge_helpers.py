"""Judge backends for the tests: scripted models whose behaviour each test needs to pin down.

`GullibleJudge` is the worst judge the verifier must withstand: it believes whatever the quoted
answer says about itself (any claim of correctness, any address to the grader, the rubric's
words) and passes it; otherwise it passes only an answer equal to the reference.
"""

from __future__ import annotations

import re

from posttrain.config_schema import SecondModelConfig
from posttrain.models.service import ModelService, register_service

PERSUADERS = re.compile(r"correct|pass|grader|judge|rubric|verdict|full marks|ignore|instruction|score|right",
                        re.IGNORECASE)


def quoted(prompt: str) -> tuple[str, str]:
    """(the candidate block, the reference) of a judge prompt."""
    cand = re.search(r"\[BEGIN (\w+)\]\n(.*)\n\[END \1\]", prompt, re.S)
    ref = re.search(r"Reference answer \(correct\):\n(.*?)\n\n", prompt, re.S)
    return (cand.group(2) if cand else ""), (ref.group(1) if ref else "")


class GullibleJudge:
    model_id = "gullible"

    def __init__(self):
        self.seen: list[str] = []

    async def chat_batch(self, convs, params):
        out = []
        for c in convs:
            prompt = c[-1]["content"]
            self.seen.append(prompt)
            cand, ref = quoted(prompt)
            out.append("PASS" if PERSUADERS.search(cand) or cand.strip() == ref.strip() else "FAIL")
        return out

    def close(self):
        pass


class FixedReply:
    """Replies the same text to everything (a position-biased or broken judge)."""

    def __init__(self, text: str):
        self.text, self.model_id, self.calls = text, f"fixed:{text}", 0

    async def chat_batch(self, convs, params):
        self.calls += 1
        return [self.text] * len(convs)

    def close(self):
        pass


def install(backend, name: str = "judge") -> ModelService:
    svc = ModelService(name, backend, SecondModelConfig(path="tiny", retries=0))
    register_service(svc)
    return svc
