"""A seeded multi-page financial report as a real PDF (reportlab), with exact ground truth.

    rep = build_report(Path("r.pdf"), seed=3)     # Report(company, tables=[GenTable ...])
    rep.tables[2].header, rep.tables[2].rows     # exactly the cells drawn in the PDF

The report has a title page, narrative sections between the tables, and four to six
ruled tables (income statement by quarter, segment revenue, regional headcount, a long
schedule of contracts or facilities). The long schedules run to 30-60 rows, so they break
across pages; reportlab repeats their header row on the continuation, as real reports do.
Every cell is a string exactly as drawn ("1,234.5", "-", "Q3 2024"), which is what an
extractor must return.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

SECTORS = ["Industrial", "Consumer", "Healthcare", "Energy", "Logistics", "Software", "Materials", "Retail"]
REGIONS = ["North America", "Western Europe", "Nordics", "Japan", "Australia", "Brazil", "India", "Middle East"]
CITIES = ["Leeds", "Tampere", "Osaka", "Porto Alegre", "Pune", "Dortmund", "Calgary", "Adelaide", "Lyon", "Gdansk",
          "Monterrey", "Busan", "Cork", "Utrecht", "Graz", "Turin", "Tucson", "Nagoya", "Bergen", "Perth"]
PREFIX = ["Arden", "Belmont", "Corvane", "Delmar", "Eastwick", "Fenlow", "Galloway", "Harwood", "Ivel", "Kestrel"]
SUFFIX = ["Holdings", "Industries", "Group", "Systems", "Partners"]
LINES = ["Revenue", "Cost of sales", "Gross profit", "Operating expenses", "Operating income", "Net income"]


@dataclass(frozen=True)
class GenTable:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    long: bool = False  # built to break across pages


@dataclass
class Report:
    company: str
    year: int
    tables: list[GenTable] = field(default_factory=list)


def _money(rng: random.Random, lo: float, hi: float) -> str:
    return f"{rng.uniform(lo, hi):,.1f}"


def _income(rng: random.Random, year: int) -> GenTable:
    header = ("Line item",) + tuple(f"Q{q} {year}" for q in range(1, 5))
    rows = []
    for name in LINES:
        rows.append((name,) + tuple(_money(rng, 100, 9000) for _ in range(4)))
    return GenTable(f"Consolidated income statement, {year} (USD thousands)", header, tuple(rows))


def _segments(rng: random.Random, year: int) -> GenTable:
    header = ("Segment", str(year - 1), str(year), "Change (%)")
    rows = []
    for s in rng.sample(SECTORS, rng.randint(4, 7)):
        a, b = rng.uniform(500, 20000), rng.uniform(500, 20000)
        rows.append((s, f"{a:,.1f}", f"{b:,.1f}", f"{100 * (b - a) / a:+.1f}"))
    return GenTable(f"Revenue by segment, {year - 1} and {year} (USD thousands)", header, tuple(rows))


def _headcount(rng: random.Random, year: int) -> GenTable:
    header = ("Region", "Employees", "Contractors", "Sites")
    rows = [(r, f"{rng.randint(40, 9000):,}", f"{rng.randint(0, 800):,}", str(rng.randint(1, 40)))
            for r in rng.sample(REGIONS, rng.randint(4, 8))]
    return GenTable(f"Headcount by region at 31 December {year}", header, tuple(rows))


def _schedule(rng: random.Random, year: int, kind: str) -> GenTable:
    n = rng.randint(30, 60)
    if kind == "contracts":
        header = ("Contract", "Counterparty", "Start", "Value (USD thousands)", "Status")
        rows = [(f"C-{rng.randint(1000, 9999)}-{i:02d}", f"{rng.choice(PREFIX)} {rng.choice(SUFFIX)}",
                 f"{rng.randint(1, 12):02d}/{year - rng.randint(0, 4)}", _money(rng, 50, 4000), rng.choice(["active", "closed", "renewed"]))
                for i in range(n)]
        return GenTable(f"Schedule of material contracts, {year}", header, tuple(rows), long=True)
    header = ("Facility", "City", "Area (m2)", "Lease end", "Annual rent (USD thousands)")
    rows = [(f"F{i + 1:03d}", rng.choice(CITIES), f"{rng.randint(200, 60000):,}", str(year + rng.randint(1, 15)), _money(rng, 10, 900))
            for i in range(n)]
    return GenTable(f"Schedule of leased facilities, {year}", header, tuple(rows), long=True)


def make_report(seed: int) -> Report:
    rng = random.Random(f"report:{seed}")
    year = rng.randint(2015, 2025)
    company = f"{rng.choice(PREFIX)} {rng.choice(SECTORS)} {rng.choice(SUFFIX)}"
    tables = [_income(rng, year), _segments(rng, year), _headcount(rng, year)]
    tables.append(_schedule(rng, year, rng.choice(["contracts", "facilities"])))
    if rng.random() < 0.5:
        tables.append(_schedule(rng, year, "facilities" if tables[-1].title.startswith("Schedule of material") else "contracts"))
    return Report(company, year, tables)


def _narrative(rng: random.Random, company: str, topic: str) -> str:
    verbs = ["reviewed", "expanded", "consolidated", "reported", "renegotiated", "monitored"]
    parts = [f"During the year {company} {rng.choice(verbs)} its {topic.lower()}."]
    for _ in range(rng.randint(3, 7)):
        parts.append(f"Management {rng.choice(verbs)} the {rng.choice(['outlook', 'risks', 'commitments', 'capacity', 'pricing'])} "
                     f"of the {rng.choice(SECTORS).lower()} business and the {rng.choice(REGIONS)} operations.")
    return " ".join(parts)


def build_report(path: Path, seed: int) -> Report:
    """Write the report for `seed` to `path`; the same seed gives the same tables."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import LongTable, PageBreak, Paragraph, SimpleDocTemplate, Spacer, TableStyle

    rep = make_report(seed)
    rng = random.Random(f"report-text:{seed}")
    styles = getSampleStyleSheet()
    story = [Paragraph(f"{rep.company}: Annual report {rep.year}", styles["Title"]), Spacer(1, 12),
             Paragraph(_narrative(rng, rep.company, "strategy"), styles["BodyText"]), PageBreak()]
    for k, t in enumerate(rep.tables, 1):
        story.append(Paragraph(f"{k}. {t.title.split(',')[0]}", styles["Heading2"]))
        story.append(Paragraph(_narrative(rng, rep.company, t.title.split(",")[0]), styles["BodyText"]))
        story.append(Paragraph(f"Table {k}: {t.title}", styles["Heading4"]))
        lt = LongTable([list(t.header)] + [list(r) for r in t.rows], repeatRows=1)
        lt.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black), ("FONTSIZE", (0, 0), (-1, -1), 8)]))
        story += [lt, Spacer(1, 18)]
    doc = SimpleDocTemplate(str(path), pagesize=A4, title=f"{rep.company} annual report {rep.year}",
                            pageCompression=0, invariant=1)  # invariant: the same seed gives the same bytes
    doc.build(story, onFirstPage=_footer, onLaterPages=_footer)
    return rep


def _footer(canvas, doc) -> None:  # the printed page number, bottom centre
    canvas.saveState()
    canvas.setFont("Helvetica", 8)
    canvas.drawCentredString(doc.pagesize[0] / 2, 20, str(doc.page))
    canvas.restoreState()
