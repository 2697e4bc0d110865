"""`posttrain view` speed on a run with 10,240 stored trajectories, in a real headless Chromium.

    .venv/bin/python benchmarks/view_bench.py [--repeats 5] [--json out.json]

Builds the run with the store's own API (posttrain/testing/synthetic_runs.py: 40 steps x 16 groups
x 16 samples, two domains, code samples with a tool call and sandbox result), serves it on
loopback, and drives /usr/bin/chromium through Playwright (posttrain/testing/view_browser.py):

- first load: a fresh page, navigation start until the curves tab has drawn (metrics, the
  per-step reward bands from SQL, every panel), ms from the page's performance.now();
- filter: submit the trajectory filter form until the table is redrawn (fetch + render),
  for a domain+reward filter, an advantage filter (the group statistics join) and a
  step-range filter;
- the same queries server-side (list_trajectories in-process, the group-statistics table
  warm as in a running viewer), without the browser;
- the curves API (metrics rows + per-step reward bands) cold and warm (cached until the
  store changes);
- the five reward-hacking detectors over the whole run (what the viewer's tab and
  report.html compute; the RL loop's live check reads only the last 50 steps).

Reports median and max over --repeats; the targets in issue 27 are < 1 s and < 200 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FILTERS = {
    "domain=code, reward>=0.5": ("code", {"reward_min": "0.5", "adv_min": "", "step_min": ""}),
    "advantage>=1": ("", {"reward_min": "", "adv_min": "1", "step_min": ""}),
    "steps>=30": ("", {"reward_min": "", "adv_min": "", "step_min": "30"}),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    from posttrain.view.app import create_app
    from posttrain.testing.view_browser import chromium_missing, chromium_page, filter_trajectories, open_tab, open_viewer
    from posttrain.view.queries import Filters, list_trajectories
    from posttrain.view.runs import RunView
    from posttrain.view.serve import serve_in_thread
    from posttrain.testing.synthetic_runs import write_run

    why = chromium_missing()
    if why:
        sys.exit(f"view_bench: {why}")
    run_dir = write_run(Path(tempfile.mkdtemp()) / "run-10k", steps=40, groups=16, group_size=16, seed=1)
    out: dict = {"trajectories": 40 * 16 * 16, "repeats": args.repeats, "browser_ms": {}, "server_ms": {}}
    with serve_in_thread(create_app([run_dir])) as url, chromium_page() as (page, errors):
        loads = []
        for _ in range(args.repeats):
            loads.append(open_viewer(page, url))
            page.goto("about:blank")
        out["browser_ms"]["first load"] = loads
        open_viewer(page, url)
        open_tab(page, "trajectories")
        for name, (domain, fields) in FILTERS.items():
            out["browser_ms"][f"filter {name}"] = [filter_trajectories(page, domain, **fields) for _ in range(args.repeats)]
        if errors:
            sys.exit(f"view_bench: console errors: {errors}")
    run = RunView(run_dir)
    for name, f in {"domain=code, reward>=0.5": Filters(domain="code", reward_min=0.5),
                    "advantage>=1": Filters(adv_min=1.0), "steps>=30": Filters(step_min=30)}.items():
        ts = []
        for _ in range(args.repeats):
            with run.db() as db:
                t0 = time.perf_counter()
                list_trajectories(db, f)  # the stored advantage column: no group table any more
                ts.append((time.perf_counter() - t0) * 1000)
        out["server_ms"][f"filter {name}"] = ts
    from fastapi.testclient import TestClient

    cold = []
    for _ in range(args.repeats):
        client = TestClient(create_app([run_dir]))  # a fresh app: nothing cached
        t0 = time.perf_counter()
        client.get("/api/runs/0/curves")
        cold.append((time.perf_counter() - t0) * 1000)
    warm = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        client.get("/api/runs/0/curves")
        warm.append((time.perf_counter() - t0) * 1000)
    from posttrain.eval.detectors import run_detectors

    det = []
    for _ in range(args.repeats):
        with run.db() as db:
            t0 = time.perf_counter()
            run_detectors(run.metrics(), db)
            det.append((time.perf_counter() - t0) * 1000)
    out["server_ms"]["all 5 detectors, whole run"] = det
    out["server_ms"]["curves API, cold"] = cold
    out["server_ms"]["curves API, warm"] = warm
    print(f"posttrain view, {out['trajectories']} trajectories, {args.repeats} repeats (ms)")
    print(f"{'measurement':42s} {'median':>8s} {'max':>8s}")
    for where in ("browser_ms", "server_ms"):
        for name, ts in out[where].items():
            print(f"{where.split('_')[0] + ': ' + name:42s} {statistics.median(ts):8.0f} {max(ts):8.0f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
