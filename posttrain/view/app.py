"""The viewer's HTTP app: a JSON API over run directories plus the packaged front end.

    app = create_app([Path("runs/a"), Path("runs/b")])
    GET /                                   -> static/index.html
    GET /api/runs                           -> [{id, label, path, summary}]
    GET /api/runs/{i}/curves                -> metrics rows + per-step reward with 95% bands
    GET /api/runs/{i}/facets?kind=train     -> filter choices
    GET /api/runs/{i}/trajectories?...      -> one filtered page (queries.Filters)
    GET /api/runs/{i}/trajectory/{kind}/{step}/{grp}/{sample}
    GET /api/runs/{i}/group/{kind}/{step}/{grp}
    GET /api/runs/{i}/task/{task_id}?step=N -> the task's group at the stored step nearest N
    GET /api/runs/{i}/eval                  -> before/after table or eval-suite summary
    GET /api/runs/{i}/detectors             -> reward-hacking detector findings
    GET /api/compare?a=0&b=1                -> paired comparison of two eval runs

Every answer is computed from the files as they are now, so a page refresh (or the front
end's polling) follows a run that is still training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from posttrain.view.evals import compare_eval, json_safe, run_eval
from posttrain.eval.run_data import reward_by_step
from posttrain.view.queries import Filters, facets, group_samples, list_trajectories, trajectory
from posttrain.view.runs import RunView, token_pieces

STATIC = Path(__file__).parent / "static"
MAX_PAGE = 500


def _throughput(rows: list[dict[str, Any]], counts: dict[int, int]) -> list[dict[str, Any]]:
    """Samples verified per second of each step's verify phase (for code and shell tasks, the
    sandbox's throughput): the stored samples of the step over its `time/verify_s`."""
    out = []
    for r in rows:
        t, n = r.get("time/verify_s"), counts.get(r["step"])
        if isinstance(t, (int, float)) and t > 0 and n:
            out.append({"step": r["step"], "throughput/verified_per_s": n / t})
    return out


def create_app(paths: Sequence[Path]) -> Any:
    labels = [Path(p).name for p in paths]
    runs = [RunView(Path(p), label=f"{lab} ({i})" if labels.count(lab) > 1 else lab)
            for i, (p, lab) in enumerate(zip(paths, labels))]
    app = FastAPI(title="posttrain view", docs_url=None, redoc_url=None)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def run_of(i: int) -> RunView:
        if not 0 <= i < len(runs):
            raise HTTPException(404, f"no run {i}; this viewer has {len(runs)}")
        return runs[i]

    def ok(x: Any) -> Any:
        return JSONResponse(json_safe(x))

    @app.get("/")
    def index() -> Any:
        return FileResponse(STATIC / "index.html")

    @app.get("/api/runs")
    def list_runs() -> Any:
        return ok([{"id": i, **r.summary()} for i, r in enumerate(runs)])

    @app.get("/api/runs/{i}/curves")
    def curves(i: int, kind: str = "train") -> Any:
        r = run_of(i)
        rows = r.metrics()
        with r.db() as db:
            rewards = r.cached(f"reward:{kind}", db, lambda c: reward_by_step(c, kind)) if db is not None else {}
            counts = r.cached(f"counts:{kind}", db, lambda q: q.counts_by_step(kind)) if db is not None else {}
        return ok({"metrics": rows, "reward": rewards, "derived": _throughput(rows, counts)})

    @app.get("/api/runs/{i}/facets")
    def run_facets(i: int, kind: str = "train") -> Any:
        with run_of(i).db() as db:
            return ok(facets(db, kind) if db is not None else {"domains": [], "count": 0, "kinds": []})

    @app.get("/api/runs/{i}/trajectories")
    def trajectories(i: int, request: Request) -> Any:
        q = dict(request.query_params)
        try:
            offset, limit = int(q.pop("offset", 0)), min(MAX_PAGE, int(q.pop("limit", 50)))
            f = Filters.from_query(q)
        except (TypeError, ValueError) as e:
            raise HTTPException(400, f"bad filter: {e}") from None
        r = run_of(i)
        with r.db() as db:
            if db is None:
                return ok({"total": 0, "rows": [], "offset": 0, "limit": limit})
            return ok(list_trajectories(db, f, offset, limit))

    @app.get("/api/runs/{i}/trajectory/{kind}/{step}/{grp}/{sample}")
    def one(i: int, kind: str, step: int, grp: int, sample: int) -> Any:
        r = run_of(i)
        with r.db() as db:
            t = trajectory(db, kind, step, grp, sample) if db is not None else None
        if t is None:
            raise HTTPException(404, f"no trajectory {kind}/{step}/{grp}/{sample}")
        t["prompt"] = r.prompt(t["task_id"])
        for turn in t["turns"]:
            turn["pieces"] = token_pieces(r, turn["token_ids"], turn["text"]) if turn["logprobs"] else []
        return ok(t)

    @app.get("/api/runs/{i}/group/{kind}/{step}/{grp}")
    def group(i: int, kind: str, step: int, grp: int) -> Any:
        r = run_of(i)
        with r.db() as db:
            g = group_samples(db, kind, step, grp) if db is not None else {"samples": []}
        if not g["samples"]:
            raise HTTPException(404, f"no group {kind}/{step}/{grp}")
        g["prompt"] = r.prompt(g["task_id"])
        return ok(g)

    @app.get("/api/runs/{i}/task/{task_id}")
    def task_near(i: int, task_id: str, step: int = 0, kind: str = "train") -> Any:
        r = run_of(i)
        with r.db() as db:
            row = db.nearest_group(kind, task_id, step) if db is not None else None
            if row is None:
                return ok({"task_id": task_id, "samples": [], "prompt": r.prompt(task_id)})
            g = group_samples(db, kind, row[0], row[1])
        g["prompt"] = r.prompt(task_id)
        return ok(g)

    @app.get("/api/runs/{i}/eval")
    def evaluation(i: int) -> Any:
        return ok(run_eval(run_of(i)) or {"kind": "none"})

    @app.get("/api/runs/{i}/detectors")
    def detectors(i: int) -> Any:
        from posttrain.eval.detectors import run_detectors

        r = run_of(i)
        rows = r.metrics()
        with r.db() as db:
            if db is None:
                return ok([f.to_dict() for f in run_detectors(rows, None)])
            return ok(r.cached(f"detectors:{len(rows)}", db, lambda c: [f.to_dict() for f in run_detectors(rows, c)]))

    @app.get("/api/compare")
    def compare(a: int = 0, b: int = 1) -> Any:
        return ok(compare_eval(run_of(a), run_of(b)) or {"kind": "none"})

    return app
