"""tests/conftest.py's RUN_FIRST names test files that exist (a renamed file would silently lose its place)."""

from pathlib import Path

from tests.conftest import RUN_FIRST

ROOT = Path(__file__).resolve().parents[3]


def test_every_file_run_first_exists():
    assert [p for p in RUN_FIRST if not (ROOT / p).is_file()] == []
