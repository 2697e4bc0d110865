"""The Dockerfile subset (and the YAML spec) that `posttrain sandbox image build` reproduces.

    steps = parse_dockerfile(Path("Dockerfile"))      # -> Recipe(suite, extra base packages, steps)
    steps = parse_yaml_spec(Path("image.yaml"))

Bases are Debian suites built by mmdebstrap: `FROM debian:<suite>` (also `debian:12`,
`debian:<suite>-slim`) and `FROM python:<ver>-slim[-<suite>]`, which is Debian's own
python3 of the suite that ships that version (3.11 -> bookworm, 3.13 -> trixie, 3.9 ->
bullseye) plus pip and venv. Instructions: RUN, COPY (and ADD of local files), WORKDIR,
ENV, USER, ARG with a default. LABEL, CMD, ENTRYPOINT, EXPOSE, MAINTAINER, VOLUME,
HEALTHCHECK and STOPSIGNAL change nothing a test can see and are recorded as ignored.
Anything else (a second FROM, `COPY --from`, ADD of a URL or archive, SHELL, ONBUILD, a
base that is no Debian suite) is an error naming the line, unless `allow_unreproducible`
(then the line is skipped and listed in the image's manifest).

YAML spec (all keys optional but `base`):

    base: bookworm            # or debian:bookworm, python:3.11-slim
    packages: [python3, git]  # apt packages, one RUN layer
    run: ["pip install attrs==23.2.0"]
    copy: {"app/": "/app/"}   # context-relative source -> image path
    workdir: /app
    env: {PIP_NO_CACHE_DIR: "1"}
    user: root
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.errors import SandboxError

SUITES = {"bullseye": "11", "bookworm": "12", "trixie": "13", "forky": "14", "sid": "unstable"}
_NUMBERS = {v: k for k, v in SUITES.items()}
PYTHON_SUITE = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
PYTHON_PACKAGES = ("python3", "python3-pip", "python3-venv")
IGNORED = {"LABEL", "CMD", "ENTRYPOINT", "EXPOSE", "MAINTAINER", "VOLUME", "HEALTHCHECK", "STOPSIGNAL"}
_ARCHIVE = re.compile(r"\.(tar|tgz|tar\.gz|tar\.xz|tar\.bz2|tar\.zst)$")


@dataclass(frozen=True)
class Step:
    line: int  # 1-based line of the instruction in its file
    op: str  # RUN | COPY | WORKDIR | ENV | USER
    args: tuple[str, ...]  # RUN: (shell command,); COPY: (*sources, dest); WORKDIR/USER: (value,); ENV: (k, v)
    text: str  # the instruction as written (continuations joined)


@dataclass
class Recipe:
    source: str  # the file it came from (for error messages)
    suite: str
    base_packages: tuple[str, ...]
    base_env: dict[str, str]
    steps: list[Step] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # lines that change nothing a test can see
    skipped: list[str] = field(default_factory=list)  # unreproducible lines the user allowed to be skipped
    context: Path = Path(".")


def _err(source: str, line: int, text: str, why: str) -> SandboxError:
    return SandboxError(f"{source}:{line}: {why}: {text.strip()[:120]!r}")


def base_for(image: str, source: str, line: int, text: str) -> tuple[str, tuple[str, ...], dict[str, str]]:
    """`debian:bookworm` / `python:3.11-slim` / `bookworm` -> (suite, extra packages, env)."""
    name, _, tag = image.partition(":")
    tag = tag or "latest"
    if name in ("debian", "docker.io/library/debian", "library/debian"):
        suite = tag.removesuffix("-slim")
        suite = _NUMBERS.get(suite, suite)
        if suite == "latest":
            raise _err(source, line, text, "base 'debian:latest' is not pinned; name the suite (debian:bookworm)")
        if suite not in SUITES:
            raise _err(source, line, text, f"no Debian suite {suite!r} (known: {', '.join(SUITES)})")
        return suite, (), {}
    if name in ("python", "docker.io/library/python", "library/python"):
        m = re.match(r"^(\d+\.\d+)(?:\.\d+)?(?:-slim)?(?:-(\w+))?$", tag)
        if not m:
            raise _err(source, line, text, f"python base tag {tag!r} must be <major.minor>[-slim][-<suite>]")
        ver, suite = m.group(1), m.group(2)
        want = PYTHON_SUITE.get(ver)
        if want is None:
            raise _err(source, line, text, f"no Debian suite ships Python {ver} (have {', '.join(f'{v}: {s}' for v, s in PYTHON_SUITE.items())})")
        if suite and suite != want:
            raise _err(source, line, text, f"Debian {suite} does not ship Python {ver} ({want} does)")
        return want, PYTHON_PACKAGES, {"PIP_BREAK_SYSTEM_PACKAGES": "1", "PIP_NO_CACHE_DIR": "1"}
    raise _err(source, line, text, f"base image {image!r} is not a Debian suite (use debian:<suite> or python:<ver>-slim)")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    out, buf, start = [], "", 0
    for i, raw in enumerate(text.splitlines(), 1):
        if not buf and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if buf and raw.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        if not buf:
            start = i
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1] + " "
            continue
        out.append((start, buf + raw))
        buf = ""
    if buf:
        out.append((start, buf))
    return out


def _expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), m.group(0)), value)


def _env_pairs(rest: str, source: str, line: int, text: str) -> list[tuple[str, str]]:
    try:
        parts = shlex.split(rest)
    except ValueError as e:
        raise _err(source, line, text, f"cannot parse ENV ({e})") from None
    if parts and all("=" in p for p in parts):
        return [tuple(p.split("=", 1)) for p in parts]  # type: ignore[misc]
    if len(parts) >= 2 and "=" not in parts[0]:
        return [(parts[0], rest.split(None, 1)[1].strip())]
    raise _err(source, line, text, "ENV needs KEY=VALUE pairs")


def parse_dockerfile(path: Path, allow_unreproducible: bool = False) -> Recipe:
    if not path.is_file():
        raise SandboxError(f"Dockerfile {str(path)!r} does not exist")
    src = str(path)
    recipe: Recipe | None = None
    args: dict[str, str] = {}
    for line, text in _logical_lines(path.read_text(encoding="utf-8", errors="replace")):
        op, _, rest = text.strip().partition(" ")
        op, rest = op.upper(), rest.strip()
        try:
            if op == "ARG":
                k, eq, v = rest.partition("=")
                if not eq:
                    raise _err(src, line, text, "ARG without a default cannot be reproduced (give it one: ARG X=value)")
                args[k.strip()] = v.strip().strip('"')
                continue
            if op == "FROM":
                if recipe is not None:
                    raise _err(src, line, text, "multi-stage builds (a second FROM) are not reproduced")
                image = _expand(rest.split()[-1] if " as " not in rest.lower() else rest.split()[0], args)
                if rest.startswith("--"):
                    raise _err(src, line, text, "FROM flags (--platform) are not reproduced")
                suite, pkgs, env = base_for(image, src, line, text)
                recipe = Recipe(src, suite, pkgs, env, context=path.parent)
                continue
            if recipe is None:
                raise _err(src, line, text, "instruction before FROM")
            env = {**args, **recipe.base_env, **{s.args[0]: s.args[1] for s in recipe.steps if s.op == "ENV"}}
            if op in IGNORED:
                recipe.ignored.append(f"{line}: {text.strip()}")
            elif op == "RUN":
                if rest.startswith("["):
                    import json

                    rest = shlex.join(json.loads(rest))
                if rest.startswith("--"):
                    raise _err(src, line, text, "RUN flags (--mount, --network) are not reproduced")
                recipe.steps.append(Step(line, "RUN", (rest,), text))
            elif op in ("COPY", "ADD"):
                recipe.steps.append(_copy_step(op, rest, line, text, src, env))
            elif op in ("WORKDIR", "USER"):
                recipe.steps.append(Step(line, op, (_expand(rest, env),), text))
            elif op == "ENV":
                for k, v in _env_pairs(rest, src, line, text):
                    recipe.steps.append(Step(line, "ENV", (k, _expand(v, env)), text))
            else:
                raise _err(src, line, text, f"instruction {op} is not reproduced")
        except SandboxError:
            if not allow_unreproducible or op == "FROM" and recipe is None:
                raise
            if recipe is not None:
                recipe.skipped.append(f"{line}: {text.strip()}")
    if recipe is None:
        raise SandboxError(f"{src}: no FROM line")
    return recipe


def _copy_step(op: str, rest: str, line: int, text: str, src: str, env: dict[str, str]) -> Step:
    parts = shlex.split(rest)
    flags = [p for p in parts if p.startswith("--")]
    parts = [_expand(p, env) for p in parts if not p.startswith("--")]
    if any(f.startswith("--from") for f in flags):
        raise _err(src, line, text, f"{op} --from (multi-stage) is not reproduced")
    if len(parts) < 2:
        raise _err(src, line, text, f"{op} needs a source and a destination")
    for s in parts[:-1]:
        if op == "ADD" and (re.match(r"^\w+://", s) or _ARCHIVE.search(s)):
            raise _err(src, line, text, "ADD of a URL or an archive is not reproduced (download it in a RUN line)")
        if s.startswith("/") or ".." in Path(s).parts:
            raise _err(src, line, text, f"{op} source {s!r} must be inside the build context")
    return Step(line, "COPY", tuple(parts), text)


def parse_yaml_spec(path: Path) -> Recipe:
    import yaml

    if not path.is_file():
        raise SandboxError(f"image spec {str(path)!r} does not exist")
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise SandboxError(f"image spec {str(path)!r} is not valid YAML: {str(e).splitlines()[0]}") from None
    known = {"base", "packages", "run", "copy", "workdir", "env", "user"}
    if not isinstance(spec, dict) or set(spec) - known:
        raise SandboxError(f"image spec {str(path)!r}: unknown key(s) {sorted(set(spec) - known) if isinstance(spec, dict) else spec!r}; known: {sorted(known)}")
    src = str(path)
    suite, pkgs, env = base_for(str(spec["base"]) if ":" in str(spec["base"]) else f"debian:{spec['base']}", src, 1, f"base: {spec['base']}")
    recipe = Recipe(src, suite, pkgs, env, context=path.parent)
    for k, v in (spec.get("env") or {}).items():
        recipe.steps.append(Step(0, "ENV", (str(k), str(v)), f"env {k}"))
    apt = [str(p) for p in spec.get("packages") or []]
    bad = [p for p in apt if not re.match(r"^[a-z0-9][a-z0-9.+-]*(=[\w.+:~-]+)?$", p)]
    if bad:
        raise SandboxError(f"image spec {src}: bad Debian package name(s) {bad}")
    if apt:
        cmd = "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends " + " ".join(apt)
        recipe.steps.append(Step(0, "RUN", (cmd,), f"packages: {apt}"))
    if spec.get("workdir"):
        recipe.steps.append(Step(0, "WORKDIR", (str(spec["workdir"]),), f"workdir: {spec['workdir']}"))
    for s, d in (spec.get("copy") or {}).items():
        recipe.steps.append(_copy_step("COPY", shlex.join([str(s), str(d)]), 0, f"copy {s}", src, {}))
    for cmd in spec.get("run") or []:
        recipe.steps.append(Step(0, "RUN", (str(cmd),), f"run: {cmd}"))
    if spec.get("user"):
        recipe.steps.append(Step(0, "USER", (str(spec["user"]),), f"user: {spec['user']}"))
    return recipe
