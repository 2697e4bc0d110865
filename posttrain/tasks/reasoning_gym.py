"""`rg-<name>`: every procedural generator of the `reasoning-gym` package as a posttrain domain.

    dom = build("rg-basic_arithmetic", kind="domain", max_terms=4)   # generator args by name
    tasks = dom.generate(n=100, seed=0, difficulty=3.0)                # difficulty 1..5

reasoning-gym (Apache-2.0, `pip install reasoning-gym==0.1.25`, the `reasoning_gym` extra)
ships ~106 generators, each with a config dataclass, a curriculum of difficulty levels and a
checker (`score_answer`). This module registers one domain per generator (`GENERATORS`, the
package's list for the pinned version; a test holds the two equal), minus `EXCLUDED`.

- Prompt: the generator's question, then one line asking for only the final answer (in the
  format the question shows); `reasoning=True` asks for step-by-step work and the answer in
  `<answer></answer>` tags instead (format rule "long").
- Format rule (`metadata["answer_format"]`): "line" when the reference answer is one line,
  "text" when it is a grid or list of lines (several lines, 2,000 characters), "long" when the
  reference is over 1,500 characters (the largest grids) or with `reasoning=True`.
- Difficulty: 1.0 (easiest) .. 5.0 (hardest) maps linearly onto EACH curriculum attribute's own
  levels (`difficulty_levels`), so 5.0 is every attribute's last level whatever its length; a
  fractional difficulty draws each task from the level below or above in proportion. The 3
  generators without a curriculum take 1.0 only; `TOP_LEVEL` caps 5 that break above it (jugs 2,
  zebra_puzzles 2, n_queens 4: minutes an item; tower_of_hanoi 2: answers over 32,000 characters;
  game_of_life 1: above it every answer is the empty grid); `PINNED` holds a field the curriculum would move
  (rubiks_cube's cube size: the package solves only 3x3). Generator arguments given by name win over the
  curriculum's value for that field.
- Seeds: a task is item `index` of the generator at seed `rg_seed(name, seed, level)` (a stable
  hash, so seeds 0 and 1 never share items, which reasoning-gym's seed+index scheme would). The
  held-out split is `make_splits`' own (eval seed, prompts disjoint from training).
- Checker: the task's verifier is `rg_answer` (verifiers/rg_answer.py), which regenerates the item
  from (name, config, seed, index) and wraps `score_answer` to pass only a full score of an answer
  within length and form limits; see there for why.

Without the package every `rg-*` domain is still listed, and using one is refused at config load
with the install command (`check_domain`). Registered extra kinds: `domain_check` (per-name
check of args and difficulties at config load) and `domain_family` (a one-line error for an
unknown `rg-*` name).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import json
import math
import random
import re
from functools import lru_cache
from typing import Any, Callable, Iterable

from posttrain.errors import ConfigError
from posttrain.registry import domain, registry
from posttrain.tasks.deadline import within
from posttrain.types import Limits, Message, Spec, Task

PREFIX = "rg-"
VERSION = "0.1.25"
REQUIREMENT = f"pip install --prefer-binary reasoning-gym=={VERSION}  (or: pip install 'posttrain[reasoning_gym]')"
MIN_DIFFICULTY, MAX_DIFFICULTY = 1.0, 5.0
# The generators of reasoning-gym 0.1.25 (`reasoning_gym.factory.DATASETS`); tests/unit/tasks holds them equal.
GENERATORS = tuple("""
ab acre advanced_geometry aiw arc_1d arc_agi base_conversion basic_arithmetic bf binary_alternation
binary_matrix bitwise_arithmetic boxnet caesar_cipher calendar_arithmetic chain_sum circuit_logic codeio
coin_flip color_cube_rotation complex_arithmetic composite count_bits count_primes countdown course_schedule
cryptarithm decimal_arithmetic decimal_chain_sum dice emoji_mystery family_relationships figlet_font
fraction_simplification futoshiki game_of_life game_of_life_halting gcd graph_color group_anagrams
gsm_symbolic intermediate_integration isomorphic_strings jugs kakurasu knight_swap knights_knaves
largest_island lcm leg_counting letter_counting letter_jumble list_functions mahjong_puzzle manipulate_matrix
maze mini_sudoku modulo_grid n_queens needle_haystack number_filtering number_format number_sequence
number_sorting palindrome_generation palindrome_partitioning path_star polynomial_equations
polynomial_multiplication pool_matrix power_function prime_factorization products propositional_logic puzzle24
quantum_lock ransom_note rearc rectangle_count rotate_matrix rotten_oranges rubiks_cube rush_hour
self_reference sentence_reordering shortest_path simple_equations simple_geometry simple_integration sokoban
spell_backward spiral_matrix string_insertion string_manipulation string_splitting string_synthesis sudoku
survo syllogism time_intervals tower_of_hanoi tsumego word_ladder word_sequence_reversal word_sorting
zebra_puzzles
""".split())
# Generators not shipped, and why (docs/tasks.md lists them; `posttrain tasks check` found the probe ones).
EXCLUDED: dict[str, str] = {
    "composite": "a mixture of the other generators, not a generator of its own",
    "boxnet": "no reference answer: nothing shows an honest answer scores 1 (the oracle check needs one)",
    "rush_hour": "no reference answer (only the minimum move count): the oracle check needs one",
    "sokoban": "its easiest level (6x6 boards) is made by rejection sampling: 1-20 s an item on 2 cores, minutes per pool",
    "propositional_logic": "any valid conclusion that is not a tautology scores 1, so one weakening scores most tasks: "
                           "\"(Q ∨ P)\" passed 12 of 12 level-1 tasks and one answer 9-11 of 12 at every level "
                           "(a constant policy paid in full)",
}
# Generators whose `score_answer` is wrong as shipped: the wrapper compares with the reference instead.
EXACT: dict[str, str] = {
    "game_of_life_halting": "score_answer tests bool(answer), so every non-empty answer (\"False True\") scores 1",
    "figlet_font": "score_answer pays 0.1 a letter in place, capped at 1.0, so any answer with 10 letters of a long "
                   "word in place scores 1: the word with two letters wrong, or the word and more (\"PYROCHEMICAL, 0\"; "
                   "benchmarks/rg_domains.py at level 4, 2026-12-07)",
}
# What a generator's checker leaves out and the wrapper checks on the answer and the item: (answer, item) ->
# why the answer cannot be honest ("" if it may be). puzzle24's score_answer checks only that four numbers in
# range make 24, never that they are the task's: "2*(3*3 + 3)" passed every puzzle24 task (found by
# benchmarks/constant_answers.py: the best constant answer of the domain, 10 of 10 held-out tasks).
def _puzzle24_numbers(answer: str, item: dict) -> str:
    used = sorted(int(n) for n in re.findall(r"\d+", answer))
    given = sorted(int(n) for n in item["metadata"]["numbers"])
    return "" if used == given else f"the expression uses {used}; the task gives {given}, each to be used once"


ITEM_RULES: dict[str, Callable[[str, dict], str]] = {"puzzle24": _puzzle24_numbers}
# Answer forms a generator's checker needs before it may run (a hostile answer can blow it up otherwise).
ANSWER_FORM: dict[str, str] = {
    "rubiks_cube": r"[UDLRFBudlrfbMESxyz' ]+",  # Singmaster moves; score_answer expands "U9999999999" and fills memory
}
# Top difficulty of generators that break above it: items take minutes to make (jugs, n_queens, zebra_puzzles:
# a search that explodes), or the reference answer outgrows the longest format rule (tower_of_hanoi: 2^10 moves,
# 32,700 characters, at level 3).
# game_of_life: from level 2 every board has died out by the step asked for, so the answer is the empty grid on
# every task (16 of 16 at each of levels 2-5: a constant policy paid in full; benchmarks/rg_domains.py constant_max).
TOP_LEVEL: dict[str, float] = {"jugs": 2.0, "n_queens": 4.0, "zebra_puzzles": 2.0, "tower_of_hanoi": 2.0,
                               "game_of_life": 1.0}
# Curriculum fields held at one value (a user's args still win): rubiks_cube's levels 2-4 ask for 4x4 and 5x5 cubes,
# for which the package has no solver, so their reference answer is empty and no task of theirs can be checked
# (benchmarks/rg_domains.py --levels 1 2 3 4 5, 2026-12-07); on 3x3 the levels still lengthen the scramble.
PINNED: dict[str, dict[str, Any]] = {"rubiks_cube": {"cube_size": 3}}
# Where the reference answer is not `entry["answer"]` (None there): a metadata field holding one (propositional_logic
# is excluded, but `benchmarks/rg_domains.py --all-generators` still checks it, to show why).
ORACLE_FIELD = {"graph_color": "possible_answer", "propositional_logic": "example_answer",
                "rubiks_cube": "example_correct_answer"}
LONG_ANSWER = 1500  # reference answers longer than this (40x40 grids) get the "long" rule's 32,000 characters
RESERVED = ("seed", "size")  # the config fields posttrain sets itself
LINE = "Give only the final answer, with no explanation."
GRID = "Give only the final answer, in the format the question shows, with no explanation."
REASON = "Think step by step, then give the final answer inside <answer></answer> tags."


def available() -> bool:
    return importlib.util.find_spec("reasoning_gym") is not None


def require() -> None:
    if not available():
        raise ConfigError(f"the {PREFIX}* domains need the reasoning-gym package: {REQUIREMENT}")


@lru_cache(maxsize=None)
def _factory() -> Any:
    require()
    import reasoning_gym.factory as f  # ~1-2 s: sympy and every generator's module

    return f


def config_fields(name: str) -> dict[str, Any]:
    """The generator's config fields a user may set, with their defaults (seed and size excluded)."""
    _, cfg_cls = _factory().DATASETS[name]
    out = {}
    for f in dataclasses.fields(cfg_cls):
        if f.name in RESERVED:
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
        else:
            out[f.name] = inspect.Parameter.empty
    return out


def difficulty_levels(name: str, difficulty: float) -> dict[str, int]:
    """Curriculum attribute -> level index for an integer `difficulty` in 1..5 (linear, rounded)."""
    f = _factory()
    if name not in f.CURRICULA:
        return {}
    frac = (difficulty - MIN_DIFFICULTY) / (MAX_DIFFICULTY - MIN_DIFFICULTY)
    cur = f.create_curriculum(name)
    return {a: int(math.floor(frac * (len(attr.levels) - 1) + 0.5)) for a, attr in cur.attributes.items()}


def make_config(name: str, difficulty: float, args: dict[str, Any]) -> dict[str, Any]:
    """The generator config fields for an integer difficulty, user args on top.

    Attribute by attribute, in the curriculum's order, a level's values are kept only if the config
    still validates: a few curricula of 0.1.25 produce configs their own `validate()` rejects (e.g.
    knight_swap's 4-node level, caesar_cipher's rotations above 25); such an attribute keeps the
    generator's default, the others still follow the difficulty."""
    f = _factory()
    if name not in f.CURRICULA:
        return dict(args)
    from reasoning_gym.coaching.attributes import RangeAttributeDefinition

    _, cfg_cls = f.DATASETS[name]
    cur = f.create_curriculum(name)
    for attr, level in difficulty_levels(name, difficulty).items():
        cur.set_attr_level(attr, level)
    full = cur.generate_configuration({})
    fields: dict[str, Any] = {}
    for attr in cur.attributes.values():
        names = ([attr.lower_field_name, attr.upper_field_name] if isinstance(attr, RangeAttributeDefinition)
                 else [attr.field_name])
        trial = {**fields, **{n: getattr(full, n) for n in names}}
        try:
            _validate(cfg_cls(**trial))
        except (AssertionError, ValueError, TypeError):
            continue
        fields = trial
    return {**fields, **PINNED.get(name, {}), **args}


def _validate(cfg: Any) -> None:
    """The config's own `validate()`; reasoning-gym's config classes define it or not (power_function
    has none), so this one lookup is of the package's classes, not a posttrain component."""
    check = getattr(type(cfg), "validate", None)
    if check is not None:
        check(cfg)


RETRY_SEEDS = 8  # seeds tried for an item a generator fails to make (ReasoningGymDomain._made)
ITEM_LIMIT_S = 30.0  # an item not made by then counts as failed (tasks/deadline.py); knight_swap's take ~5 s


def rg_seed(name: str, seed: int, level: float) -> int:
    return int(hashlib.sha256(f"{name}:{seed}:{level:g}".encode()).hexdigest()[:8], 16)


@lru_cache(maxsize=256)
def dataset(name: str, level: float, args_json: str, seed: int, size: int) -> Any:
    """The generator at one level (user args as canonical JSON), memoised: the verifier asks again."""
    cfg = make_config(name, level, json.loads(args_json))
    try:
        return _factory().create_dataset(name, seed=seed, size=size, **cfg)
    except (AssertionError, ValueError, TypeError) as e:  # the config's own validate()
        raise ConfigError(f"{PREFIX}{name}: bad generator arguments {json.loads(args_json)} at difficulty {level:g}: "
                          f"{e or type(e).__name__}") from None


@lru_cache(maxsize=16384)
def item(name: str, level: float, args_json: str, seed: int, size: int, index: int) -> dict:
    """Item `index` of the generator: what `score_answer` takes. Regenerated from the task's spec, never
    stored; memoised, and filled by `generate`, so the verifier in the same process finds it made
    (sokoban and knight_swap take seconds an item)."""
    return dataset(name, level, args_json, seed, size)[index]


def reference_answer(name: str, item: dict) -> str | None:
    if name in ORACLE_FIELD:
        value = item["metadata"].get(ORACLE_FIELD[name])
        if name == "graph_color" and isinstance(value, dict):
            return json.dumps({str(k): v for k, v in value.items()})
        return None if value is None else str(value).strip()
    return None if item["answer"] is None else str(item["answer"])


def _level_counts(n: int, difficulty: float, rng: random.Random) -> dict[float, int]:
    """How many of `n` tasks come from the integer level below / above a fractional difficulty."""
    lo = math.floor(difficulty)
    hi_share = difficulty - lo
    n_hi = sum(rng.random() < hi_share for _ in range(n)) if hi_share > 0 else 0
    return {float(lo): n - n_hi, float(lo + 1): n_hi} if n_hi else {float(lo): n}


class ReasoningGymDomain:
    """One reasoning-gym generator; `args` are its config fields (checked by name at config load)."""

    def __init__(self, generator: str, max_new_tokens: int | None = None, reasoning: bool = False,
                 timeout_s: float = 30.0, **args: Any) -> None:
        self.generator, self.name = generator, PREFIX + generator
        self.reasoning, self.timeout_s, self.args = reasoning, timeout_s, dict(args)
        self.max_new_tokens = max_new_tokens or (1024 if reasoning else 256)
        check_domain(self.name, self.args, [MIN_DIFFICULTY], key=f"domain {self.name}")

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        check_difficulty(self.name, difficulty, f"domain {self.name}")
        rng = random.Random(f"{self.name}:{seed}:{difficulty}")
        tasks: list[Task] = []
        for level, count in _level_counts(n, difficulty, rng).items():
            s = rg_seed(self.generator, seed, level)
            args_json = json.dumps(self.args, sort_keys=True)
            tasks += [self._made(level, args_json, s, count, i) for i in range(count)]
        return tasks

    def _made(self, level: float, args_json: str, seed: int, size: int, index: int) -> Task:
        """Item `index`; where the generator fails to make it (tsumego's "Failed to generate a capture
        problem" on some seeds), makes one its own checker fails the reference of (`_unanswerable`), or is still
        at it after ITEM_LIMIT_S (number_sequence on some seeds), the
        same index of the next seeds, up to RETRY_SEEDS: the task's spec names the seed that made it, so
        the verifier regenerates the same item."""
        for s in range(seed, seed + RETRY_SEEDS):
            try:
                with within(ITEM_LIMIT_S):  # number_sequence's squares grow without end on some seeds
                    made = item(self.generator, level, args_json, s, size, index)
                    unanswerable = self._unanswerable(made, level, args_json, s, size)
            except ConfigError:
                raise
            except Exception as e:  # noqa: BLE001  the generator's own failure to make this item
                err = e
                continue
            if unanswerable:
                err = RuntimeError(unanswerable)
                continue
            return self._task(made, level, s, size, index)
        raise RuntimeError(f"{self.name}: reasoning-gym failed to make item {index} at difficulty {level:g} on "
                           f"{RETRY_SEEDS} seeds from {seed}: {err}")

    def _unanswerable(self, made: dict, level: float, args_json: str, seed: int, size: int) -> str:
        """Why no answer can pass this item ("" if its reference does): the generator's own checker must give its
        reference answer a full score. jugs at level 2 makes some puzzles with no solution, whose reference is
        "No solution" and scores 0 (benchmarks/rg_domains.py, 2026-12-07): a task nothing passes teaches nothing
        and lowers every pass rate alike, so the item is made from the next seed instead."""
        ref = reference_answer(self.generator, made)
        if ref is None or self.generator in EXACT:  # EXACT: the wrapper compares with the reference itself
            return ""
        if float(dataset(self.generator, level, args_json, seed, size).score_answer(ref, made)) >= 1.0 - 1e-9:
            return ""
        return f"its own checker fails its reference answer {ref[:40]!r}"

    def _task(self, item: dict, level: float, seed: int, size: int, index: int) -> Task:
        answer = reference_answer(self.generator, item)
        multi = answer is not None and "\n" in answer.strip()
        long = self.reasoning or (answer is not None and len(answer) > LONG_ANSWER)  # big grids at high levels
        fmt = "long" if long else ("text" if multi else "line")
        ask = REASON if self.reasoning else (GRID if multi else LINE)
        oracle = None if answer is None else (f"<answer>{answer}</answer>" if self.reasoning else answer)
        return Task(
            id=f"{self.name}-{seed}-{level:g}-{index}", domain=self.name,
            prompt=(Message("user", f"{item['question'].rstrip()}\n\n{ask}"),),
            verifier=Spec("rg_answer", {"generator": self.generator, "level": level, "args": self.args, "seed": seed,
                                        "size": size, "index": index}),
            difficulty=level,
            limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=self.timeout_s),
            metadata={"answer_format": fmt, "generator": self.generator, "rg_version": VERSION, "rg_tags": self.reasoning},
            oracle=oracle,
        )

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        """A plausible wrong answer: the reference with one token changed (a flipped yes/no, a number's
        leading digit, a letter, the last item dropped). Several generators accept many answers (a
        coloring, a path, an expression), so the first candidate the generator's own checker rates
        below 1 is used; without one, the first candidate."""
        ref = task.oracle or ""
        inner = re.search(r"<answer>(.*)</answer>", ref, re.S)
        text = inner.group(1) if inner else ref
        cands = [c for c in perturbations(text, rng) if c.strip() != text.strip()] or [text + " x"]
        spec = task.verifier.args
        key = (self.generator, float(spec["level"]), json.dumps(dict(spec["args"]), sort_keys=True),
               int(spec["seed"]), int(spec["size"]))
        entry, scorer = item(*key, int(spec["index"])), dataset(*key)
        wrong = cands[0]
        for c in cands:
            try:
                if float(scorer.score_answer(c, entry)) < 1.0:
                    wrong = c
                    break
            except Exception:  # noqa: BLE001  a candidate the checker cannot parse is wrong enough
                wrong = c
                break
        return f"<answer>{wrong}</answer>" if inner else wrong


_FLIPS = {"yes": "no", "no": "yes", "true": "false", "false": "true", "knight": "knave", "knave": "knight"}


def perturbations(text: str, rng: random.Random) -> list[str]:
    """Candidate wrong answers, most plausible first."""
    out = []
    words = list(re.finditer(r"[A-Za-z]+|\d+", text))
    for m in reversed(words):  # the last flippable word: "Yes", "False", "knave"
        w = m.group(0)
        if w.lower() in _FLIPS:
            new = _FLIPS[w.lower()]
            out.append(text[: m.start()] + (new.capitalize() if w[0].isupper() else new) + text[m.end():])
            break
    for m in [m for m in words if m.group(0).isdigit()][:3]:  # a number's leading digit: a large change
        w = m.group(0)
        d = int(w[0])
        new = str(d + 1) if d < 9 else "8"
        out.append(text[: m.start()] + new + w[1:] + text[m.end():])
    for m in [m for m in words if m.group(0).isalpha()][-2:]:  # a letter of a word
        w = m.group(0)
        i = rng.randrange(len(w))
        c = "q" if w[i].lower() != "q" else "z"
        out.append(text[: m.start()] + w[:i] + (c.upper() if w[i].isupper() else c) + w[i + 1:] + text[m.end():])
    parts = re.split(r"(\s*[,\n]\s*|\s+)", text.strip())
    if len(parts) > 2:
        out.append("".join(parts[:-2]))  # the last item dropped
    out.append("0" if text.strip() != "0" else "1")
    return out


def check_difficulty(name: str, difficulty: float, key: str) -> None:
    gen = name.removeprefix(PREFIX)
    top = TOP_LEVEL.get(gen, MAX_DIFFICULTY) if gen in _factory().CURRICULA else MIN_DIFFICULTY
    if not (isinstance(difficulty, (int, float)) and MIN_DIFFICULTY <= difficulty <= top):
        raise ConfigError(f"{key}: difficulty {difficulty!r} is out of range for {name}: it takes "
                          f"{MIN_DIFFICULTY:g}..{top:g}" + ("" if top > MIN_DIFFICULTY else " (the generator has no levels)"))


def check_domain(name: str, args: dict[str, Any], difficulties: Iterable[float], key: str) -> None:
    """Config-load check: package installed, args are the generator's fields, difficulties in range
    and the generator's own validate() accepts the config at each (one-line ConfigError naming it)."""
    require()
    gen = name.removeprefix(PREFIX)
    fields = config_fields(gen)
    for k in args:
        if k not in fields:
            raise ConfigError(f"{key}.args.{k}: {name} takes no argument {k!r}; it takes: {', '.join(fields) or 'none'}")
    for d in difficulties:
        check_difficulty(name, d, key)
        for level in {float(math.floor(d)), float(math.ceil(d))}:
            validate_config(gen, level, args)


def validate_config(generator: str, level: float, args: dict[str, Any]) -> None:
    """The generator's config at `level` with `args` passes its own validate(); builds no dataset
    (some generators precompute in their constructor: a config check must stay cheap)."""
    _, cfg_cls = _factory().DATASETS[generator]
    try:
        _validate(cfg_cls(**make_config(generator, level, args)))
    except (AssertionError, ValueError, TypeError) as e:
        raise ConfigError(f"{PREFIX}{generator}: bad generator arguments {args} at difficulty {level:g}: "
                          f"{e or type(e).__name__}") from None


class _Factory:
    """What `@domain` registers per generator: builds the domain; its signature is the
    generator's config fields (so `check_kwargs` names a bad argument at config load)."""

    def __init__(self, generator: str) -> None:
        self.generator = generator

    def __call__(self, **kwargs: Any) -> ReasoningGymDomain:
        return ReasoningGymDomain(self.generator, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        own = [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v)
               for k, v in (("max_new_tokens", None), ("reasoning", False), ("timeout_s", 30.0))]
        gen = [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v)
               for k, v in config_fields(self.generator).items()]
        return inspect.Signature(own + gen)


def shipped() -> list[str]:
    return [g for g in GENERATORS if g not in EXCLUDED]


def explain_unknown(name: str) -> str | None:
    """The one-line error for an unknown `rg-*` domain name (None: not this family's)."""
    if not name.startswith(PREFIX):
        return None
    gen = name.removeprefix(PREFIX)
    if gen in EXCLUDED:
        return f"{name} is excluded from the reasoning-gym family: {EXCLUDED[gen]} (docs/tasks.md)"
    return f"reasoning-gym has no generator {gen!r}; known: {', '.join(PREFIX + g for g in shipped())}"


for _gen in shipped():
    domain(PREFIX + _gen)(_Factory(_gen))
    registry("domain_check").register(PREFIX + _gen)(check_domain)
registry("domain_family").register(PREFIX)(explain_unknown)
