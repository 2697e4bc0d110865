"""`extraction`: a generated document (invoice, financial table, form) -> a JSON object.

The prompt gives the document and the JSON Schema; the verifier is
`gate(json_schema, field_match)`: output that does not validate scores 0, valid output
earns the share of fields that match (numbers to the cent). Difficulty (0..3) adds line
items / table rows / form fields and layout noise (reordered fields, thousands
separators, dates written out in words).
"""

from __future__ import annotations

import json
import random
from typing import Any

from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task, thaw

VENDORS = ["Acme Tools Ltd", "Northwind Traders", "Blue Heron Supply", "Kestrel Labs", "Orchid & Finch"]
GOODS = ["hex bolts", "copper wire", "safety gloves", "LED panel", "drill bits", "cable ties", "sealant", "fuse box"]
FIRST = ["Ada", "Ravi", "Mei", "Jonas", "Leila", "Tomas", "Noor", "Ines"]
LAST = ["Okafor", "Lindqvist", "Tanaka", "Moreau", "Haddad", "Silva", "Novak", "Kaur"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
NUM = {"type": "number"}
STR = {"type": "string"}


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _date(rng: random.Random, words: bool) -> tuple[str, str]:
    y, m, d = rng.randrange(2019, 2026), rng.randrange(1, 13), rng.randrange(1, 29)
    iso = f"{y:04d}-{m:02d}-{d:02d}"
    return iso, (f"{MONTHS[m - 1]} {d}, {y}" if words else iso)


def _money(x: float, sep: bool) -> str:
    return f"{x:,.2f}" if sep else f"{x:.2f}"


def _invoice(rng: random.Random, level: int) -> tuple[str, dict, dict]:
    iso, shown = _date(rng, level >= 2)
    items = []
    for g in rng.sample(GOODS, 1 + level):
        qty, price = rng.randrange(1, 50), round(rng.uniform(0.5, 400), 2)
        items.append({"description": g, "quantity": qty, "unit_price": price})
    subtotal = round(sum(i["quantity"] * i["unit_price"] for i in items), 2)
    rate = rng.choice([0, 5, 8, 10, 20])
    tax = round(subtotal * rate / 100, 2)
    want = {"vendor": rng.choice(VENDORS), "invoice_number": f"INV-{rng.randrange(10000, 99999)}", "date": iso,
            "currency": rng.choice(["USD", "EUR", "GBP"]), "items": items, "subtotal": subtotal, "tax": tax,
            "total": round(subtotal + tax, 2)}
    sep = level >= 1
    lines = [f"{want['vendor']}", f"Invoice no. {want['invoice_number']}    Date: {shown}", f"Currency: {want['currency']}", "",
             f"{'Item':<16}{'Qty':>5}{'Unit':>12}{'Amount':>12}"]
    lines += [f"{i['description']:<16}{i['quantity']:>5}{_money(i['unit_price'], sep):>12}{_money(i['quantity'] * i['unit_price'], sep):>12}" for i in items]
    lines += ["", f"Subtotal: {_money(subtotal, sep)}", f"Tax ({rate}%): {_money(tax, sep)}", f"TOTAL DUE: {_money(want['total'], sep)}"]
    item = _obj({"description": STR, "quantity": {"type": "integer"}, "unit_price": NUM})
    schema = _obj({"vendor": STR, "invoice_number": STR, "date": {**STR, "pattern": r"^\d{4}-\d{2}-\d{2}$"}, "currency": {"enum": ["USD", "EUR", "GBP"]},
                   "items": {"type": "array", "items": item}, "subtotal": NUM, "tax": NUM, "total": NUM})
    return "\n".join(lines), want, schema


def _financials(rng: random.Random, level: int) -> tuple[str, dict, dict]:
    quarters = [f"Q{q} {y}" for y in (2023, 2024) for q in range(1, 5)][: 2 + level]
    rows = []
    for q in quarters:
        rev = round(rng.uniform(1e5, 5e6), 2)
        cost = round(rev * rng.uniform(0.4, 1.1), 2)
        rows.append({"quarter": q, "revenue": rev, "costs": cost, "profit": round(rev - cost, 2)})
    want = {"company": rng.choice(VENDORS), "currency": "USD", "rows": rows}
    sep = level >= 1
    text = [f"{want['company']} - quarterly results (USD)", "| Quarter | Revenue | Costs | Profit |", "|---|---|---|---|"]
    text += [f"| {r['quarter']} | {_money(r['revenue'], sep)} | {_money(r['costs'], sep)} | {_money(r['profit'], sep)} |" for r in rows]
    row = _obj({"quarter": STR, "revenue": NUM, "costs": NUM, "profit": NUM})
    return "\n".join(text), want, _obj({"company": STR, "currency": {"const": "USD"}, "rows": {"type": "array", "items": row}})


def _form(rng: random.Random, level: int) -> tuple[str, dict, dict]:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    iso, shown = _date(rng, level >= 2)
    want: dict[str, Any] = {"full_name": f"{first} {last}", "email": f"{first}.{last}@example.org".lower(),
                            "phone": f"+1-555-{rng.randrange(100, 999)}-{rng.randrange(1000, 9999)}", "date_of_birth": iso,
                            "newsletter": rng.random() < 0.5}
    if level >= 1:
        want["age"] = rng.randrange(18, 90)
    if level >= 3:
        want["city"] = rng.choice(["Lisbon", "Osaka", "Toronto", "Nairobi"])
    labels = {"full_name": "Name", "email": "E-mail", "phone": "Telephone", "date_of_birth": "Born", "newsletter": "Subscribe to newsletter",
              "age": "Age", "city": "City"}
    shown_vals = {**want, "date_of_birth": shown, "newsletter": "[x] yes" if want["newsletter"] else "[ ] yes"}
    keys = list(want)
    if level >= 2:
        rng.shuffle(keys)
    text = "REGISTRATION FORM\n" + "\n".join(f"{labels[k]}: {shown_vals[k]}" for k in keys)
    props = {k: ({"type": "boolean"} if k == "newsletter" else {"type": "integer"} if k == "age" else STR) for k in want}
    return text, want, _obj(props)


KINDS = {"invoice": _invoice, "financials": _financials, "form": _form}


@domain("extraction")
class Extraction:
    name = "extraction"

    def __init__(self, max_new_tokens: int = 512) -> None:
        self.max_new_tokens = max_new_tokens

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"extraction:{seed}:{difficulty}")
        level = max(0, min(3, round(difficulty)))
        tasks = []
        for i in range(n):
            kind = rng.choice(sorted(KINDS))
            doc, want, schema = KINDS[kind](rng, level)
            prompt = (f"Extract the data from this {kind} document as one JSON object that validates against the schema.\n\n"
                      f"Schema:\n{json.dumps(schema)}\n\nDocument:\n{doc}")
            tasks.append(Task(
                id=f"extraction-{seed}-{i}", domain=self.name, prompt=(Message("user", prompt),),
                verifier=Spec("gate", {"gate": {"name": "json_schema", "args": {"schema": schema}},
                                       "then": {"name": "field_match", "args": {"expected": want}}}),
                difficulty=float(level), limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=30.0),
                metadata={"kind": kind}, oracle=json.dumps(want),
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        want = json.loads(task.oracle or "{}")
        key = rng.choice(sorted(want))
        val = want[key]
        if isinstance(val, bool):
            want[key] = not val
        elif isinstance(val, (int, float)):
            want[key] = val + rng.choice([1, 10, 100])
        elif isinstance(val, str):
            want[key] = val[::-1] + "x" if rng.random() < 0.5 else val[:-1] + ("0" if val[-1] != "0" else "1")
        else:  # a list of rows: drop the last row's first number
            row = val[-1]
            k = next(k for k in row if isinstance(row[k], (int, float)))
            row[k] = row[k] + 1
        return json.dumps(thaw(want))
