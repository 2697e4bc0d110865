"""ModelReader prompt/parse/grounding logic, driven by a scripted engine.

The engine here is a test double (it replies from a script), so these tests check the
reader's plumbing only: chat-template prompts, parsing `<value> [cN]`, grounding the
value to a sentence's offsets, and map-reduce when the context does not fit.
"""

from __future__ import annotations

from posttrain.longctx import CharTokenizer, LongDoc
from posttrain.longctx.model_reader import ModelReader, ModelSupport
from posttrain.models.tiny import build_tokenizer
from posttrain.rollout.engine import Completion

TOK = build_tokenizer()
DOC = "## Orion\nThe access code of Orion is 4417. Bob guards it.\n\n## Lyra\nThe access code of Lyra is 9921.\n"
Q = "What is the access code of Orion?"


class ScriptedEngine:
    weights_version = 0

    def __init__(self, reply):
        self.reply, self.prompts = reply, []

    def generate(self, requests):
        out = []
        for r in requests:
            prompt = TOK.decode(list(r.prompt_ids))
            self.prompts.append(prompt)
            text = self.reply(prompt)[: r.params.max_new_tokens]
            out.append(Completion(r.id, 0, tuple(TOK.encode(text, add_special_tokens=False)), (), text, "stop"))
        return out

    def load_weights(self, state, version):
        self.weights_version = version


def answering(value):
    return lambda p: "summary" if "Summarise" in p else (f"{value} [c0]" if "Question:" in p else "")


def test_answer_is_grounded_to_the_sentence_that_holds_it():
    reader = ModelReader(ScriptedEngine(answering("4417")), TOK, context_tokens=4096)
    res = LongDoc(DOC, reader, CharTokenizer(), max_tokens=200).ask(Q, top_k=2)
    cite = res.verified.claims[0].citations[0]
    assert res.answer == "4417" and DOC[cite.start : cite.end] == "The access code of Orion is 4417."


def test_value_absent_from_context_ends_as_not_found():
    reader = ModelReader(ScriptedEngine(answering("5555")), TOK, context_tokens=4096)
    res = LongDoc(DOC, reader, CharTokenizer(), max_tokens=200).ask(Q, top_k=2)
    assert res.draft and res.answer == "not found"


def test_small_context_reads_chunks_one_call_each():
    engine = ScriptedEngine(answering("not found"))
    reader = ModelReader(engine, TOK, context_tokens=220)
    LongDoc(DOC, reader, CharTokenizer(), max_tokens=60).ask(Q, top_k=2)
    answer_prompts = [p for p in engine.prompts if "Question:" in p]
    assert len(answer_prompts) == 2 and all(len(TOK.encode(p)) + reader.answer_tokens <= 220 for p in answer_prompts)


def test_prompts_use_the_chat_template():
    engine = ScriptedEngine(answering("4417"))
    LongDoc(DOC, ModelReader(engine, TOK, context_tokens=4096), CharTokenizer(), max_tokens=200).ask(Q)
    assert all(p.rstrip().endswith("<|assistant|>") for p in engine.prompts)


def test_model_support_reads_yes_as_supported():
    yes, no = ModelSupport(ScriptedEngine(lambda p: "yes"), TOK), ModelSupport(ScriptedEngine(lambda p: "no"), TOK)
    assert yes.support("4417", "code is 4417", Q) == 1.0 and no.support("4417", "code is 4417", Q) == 0.0
