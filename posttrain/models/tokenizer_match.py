"""On-policy distillation's precondition: the student and the teacher share one tokenizer.

    check_teacher_tokenizer(cfg)   # ConfigError naming both models when the vocabularies differ

The teacher scores the student's own sampled tokens, so both must map text to the same ids.
Checked at config load from the tokenizers alone (no weights are read): the vocabularies
(token -> id) and the EOS token must be equal.
"""

from __future__ import annotations

from typing import Any

from posttrain.errors import ConfigError


def load_tokenizer(path: str | None) -> Any:
    """The tokenizer of a model directory, or of the built-in tiny model for None / `tiny`."""
    if path in (None, "tiny"):
        from posttrain.models.tiny import build_tokenizer

        return build_tokenizer()
    from transformers import AutoTokenizer

    from posttrain.models.io import hf_model_dir

    return AutoTokenizer.from_pretrained(hf_model_dir(path))


def tokenizer_mismatch(a: Any, b: Any) -> str | None:
    """Why two tokenizers differ, or None when they map every token to the same id."""
    va, vb = a.get_vocab(), b.get_vocab()
    if len(va) != len(vb):
        return f"vocabularies of {len(va)} and {len(vb)} tokens"
    if va != vb:
        tok = next(t for t in va if vb.get(t) != va[t])
        return f"token {tok!r} is id {va[tok]} in one and {vb.get(tok)} in the other"
    if a.eos_token != b.eos_token:
        return f"EOS {a.eos_token!r} vs {b.eos_token!r}"
    return None


def check_teacher_tokenizer(cfg: Any) -> None:
    """For a run whose rl.loss is `distill`: a local teacher under models.teacher, sharing model.path's tokenizer."""
    if cfg.rl.loss.name != "distill":
        return
    teacher = cfg.models.get("teacher")
    if teacher is None:
        raise ConfigError("rl.loss=distill needs a teacher: models.teacher.path (a local HF directory)")
    if teacher.path is None:
        raise ConfigError(f"models.teacher.url={teacher.url}: distillation needs the teacher's per-token logprobs on "
                          "the student's tokens; give models.teacher.path (a local HF directory)")
    student = cfg.model.path or "tiny"
    why = tokenizer_mismatch(load_tokenizer(student), load_tokenizer(teacher.path))
    if why is not None:
        raise ConfigError(f"on-policy distillation needs one tokenizer: student {student} and teacher {teacher.path} "
                          f"differ ({why})")
