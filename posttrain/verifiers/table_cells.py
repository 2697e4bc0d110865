"""`table_cells`: a table extracted to JSON, checked cell by cell against the drawn table.

The answer is one JSON object {"header": [...], "rows": [[...], ...]}. Cells compare after
whitespace is collapsed (and nothing else: "1,234.5" is not "1234.5"). score = cells right
in place / max(cells expected, cells given), so missing rows and padded rows both cost;
pass only when every cell is right. A schema-valid empty table, or any table without a
single right body cell, scores 0 (a header copied from the prompt is not an extraction).
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.math_answer import final_text

_WS = re.compile(r"\s+")
_OBJ = re.compile(r"\{.*\}", re.S)


def _cell(x: Any) -> str:
    return _WS.sub(" ", str(x)).strip()


def parse_table(text: str) -> tuple[list[str], list[list[str]]] | None:
    m = _OBJ.search(text)
    if not m:
        return None
    try:
        obj = json.loads(m.group())
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("header"), list) or not isinstance(obj.get("rows"), list):
        return None
    if not all(isinstance(r, list) for r in obj["rows"]):
        return None
    return [_cell(h) for h in obj["header"]], [[_cell(c) for c in r] for r in obj["rows"]]


@verifier("table_cells", answer_format="line")
class TableCells:
    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.header = [_cell(h) for h in header]
        self.rows = [[_cell(c) for c in r] for r in rows]

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        got = parse_table(final_text(trajectory))
        if got is None:
            return VerifyResult.fail("no JSON object with a header list and a rows list")
        header, rows = got
        right_body = sum(a == b for gr, wr in zip(rows, self.rows) for a, b in zip(gr, wr))
        right = right_body + sum(a == b for a, b in zip(header, self.header))
        want = len(self.header) + sum(len(r) for r in self.rows)
        given = len(header) + sum(len(r) for r in rows)
        score = 0.0 if right_body == 0 else right / max(want, given)
        info = {"cells_right": right, "cells_expected": want, "cells_given": given, "rows_expected": len(self.rows), "rows_given": len(rows)}
        return VerifyResult(score, score == 1.0, info)
