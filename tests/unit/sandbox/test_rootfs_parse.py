"""The Dockerfile subset and YAML spec: bases map to Debian suites; what cannot be reproduced is an error naming its line."""

from __future__ import annotations

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox.dockerfile import parse_dockerfile, parse_yaml_spec


def _df(tmp_path, text, **kw):
    p = tmp_path / "Dockerfile"
    p.write_text(text)
    return parse_dockerfile(p, **kw)


@pytest.mark.parametrize("base,suite,python", [("debian:bookworm", "bookworm", False), ("debian:12", "bookworm", False),
                                               ("debian:trixie-slim", "trixie", False), ("python:3.11-slim", "bookworm", True),
                                               ("python:3.13-slim-trixie", "trixie", True), ("python:3.9", "bullseye", True)])
def test_bases_map_to_debian_suites(tmp_path, base, suite, python):
    r = _df(tmp_path, f"FROM {base}\nRUN true\n")
    assert r.suite == suite and ("python3" in r.base_packages) == python


def test_instructions_become_steps_with_their_lines(tmp_path):
    r = _df(tmp_path, "FROM debian:bookworm\n# c\nRUN apt-get update && \\\n    apt-get install -y jq\nWORKDIR /app\nCOPY a b /app/\n"
                      "ENV A=1 B=\"two words\"\nUSER nobody\nCMD [\"bash\"]\n")
    assert [(s.line, s.op) for s in r.steps] == [(3, "RUN"), (5, "WORKDIR"), (6, "COPY"), (7, "ENV"), (7, "ENV"), (8, "USER")]
    assert r.steps[0].args == ("apt-get update &&      apt-get install -y jq",)
    assert [s.args for s in r.steps if s.op == "ENV"] == [("A", "1"), ("B", "two words")] and r.ignored == ['9: CMD ["bash"]']


@pytest.mark.parametrize("text,match", [
    ("FROM ubuntu:22.04\n", r"Dockerfile:1: base image 'ubuntu:22.04' is not a Debian suite"),
    ("FROM debian:potato\n", r"Dockerfile:1: no Debian suite 'potato'"),
    ("FROM debian\n", r"Dockerfile:1: base 'debian:latest' is not pinned"),
    ("FROM python:3.12-slim\n", r"Dockerfile:1: no Debian suite ships Python 3.12"),
    ("FROM debian:bookworm\nRUN true\nADD https://x.org/a.tgz /a\n", r"Dockerfile:3: ADD of a URL or an archive"),
    ("FROM debian:bookworm\nCOPY --from=build /a /a\n", r"Dockerfile:2: COPY --from"),
    ("FROM debian:bookworm\nFROM debian:trixie\n", r"Dockerfile:2: multi-stage"),
    ("FROM debian:bookworm\nSHELL [\"/bin/zsh\"]\n", r"Dockerfile:2: instruction SHELL is not reproduced"),
    ("FROM debian:bookworm\nRUN --mount=type=cache,target=/x true\n", r"Dockerfile:2: RUN flags"),
    ("FROM debian:bookworm\nCOPY ../secret /x\n", r"Dockerfile:2: COPY source '../secret' must be inside"),
    ("ARG V\nFROM debian:bookworm\n", r"Dockerfile:1: ARG without a default"),
])  # fmt: skip
def test_unreproducible_lines_are_errors_naming_the_line(tmp_path, text, match):
    with pytest.raises(SandboxError, match=match):
        _df(tmp_path, text)


def test_allow_unreproducible_skips_and_records_the_lines(tmp_path):
    r = _df(tmp_path, "FROM debian:bookworm\nSHELL [\"/bin/zsh\"]\nRUN true\n", allow_unreproducible=True)
    assert r.skipped == ['2: SHELL ["/bin/zsh"]'] and [s.op for s in r.steps] == ["RUN"]


def test_arg_defaults_expand_in_from(tmp_path):
    assert _df(tmp_path, "ARG SUITE=trixie\nFROM debian:${SUITE}\n").suite == "trixie"


def test_yaml_spec(tmp_path):
    p = tmp_path / "img.yaml"
    p.write_text("base: bookworm\npackages: [jq, git]\nworkdir: /app\nrun: ['echo hi > /app/x']\nenv: {A: '1'}\n")
    r = parse_yaml_spec(p)
    assert r.suite == "bookworm" and [s.op for s in r.steps] == ["ENV", "RUN", "WORKDIR", "RUN"]
    assert "install -y -q --no-install-recommends jq git" in r.steps[1].args[0]


@pytest.mark.parametrize("text,match", [("base: bookworm\npackages: ['jq; rm -rf /']\n", "bad Debian package"),
                                        ("base: bookworm\ncolour: red\n", "unknown key"), ("base: potato\n", "no Debian suite")])
def test_bad_yaml_spec(tmp_path, text, match):
    p = tmp_path / "img.yaml"
    p.write_text(text)
    with pytest.raises(SandboxError, match=match):
        parse_yaml_spec(p)
