"""tools/uv_sources.py: `make install` hands uv the package sources pip is configured with."""

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("uv_sources", Path(__file__).resolve().parents[3] / "tools" / "uv_sources.py")
uv_sources = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_sources)


def test_every_pip_source_becomes_the_uv_flag_of_the_same_meaning():
    listed = ("global.cert='/etc/ssl/certs/ca.crt'\n"
              "global.constraint='/etc/xdg/pip/constraints.txt'\n"
              "global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'\n"
              "global.find-links='/opt/wheels'\n"
              ":env:.find-links='/opt/wheels'\n")  # the same folder from a PIP_* variable: once
    assert uv_sources.uv_flags(listed) == [
        "--index-strategy", "unsafe-best-match", "--constraint", "/etc/xdg/pip/constraints.txt",
        "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels"]


def test_no_pip_configuration_leaves_uv_on_its_defaults_with_pips_version_rule():
    assert uv_sources.uv_flags("") == ["--index-strategy", "unsafe-best-match"]
