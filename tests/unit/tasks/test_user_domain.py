"""The docs' user-domain example, loaded from a file outside the package, is a sound domain."""

import asyncio
import re
from pathlib import Path

from posttrain.verifiers.soundness.check import check_domain
from posttrain.tasks.plugins import load_plugin

DOC = Path(__file__).resolve().parents[3] / "docs" / "tasks.md"


def test_docs_example_is_a_complete_domain_under_60_lines(tmp_path):
    code = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)[-1]
    assert len(code.splitlines()) < 60
    path = tmp_path / "my_reverse_domain.py"
    path.write_text(code)
    load_plugin(path)
    report = asyncio.run(check_domain("reverse", n=10, repeats=2))
    assert report.sound, report.as_json()
    assert 0 < report.wrong_mean_score < 1  # partial credit for a near miss
