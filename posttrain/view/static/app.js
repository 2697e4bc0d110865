// The viewer's shell: run selection, tabs, curves (polled while a run grows).
"use strict";
const state = {runs: [], a: 0, b: null, tab: "curves", curves: {}, timer: null};

async function api(path) {
  const r = await fetch(path);
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

function esc(s) {
  return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}

function num(v, d = 3) { return v === null || v === undefined || !isFinite(v) ? "–" : (+v).toFixed(d); }
// a p-value: 4 decimals, or scientific below 1e-3 (4.9e-5 must not read 0.0000); the same rule as report.py's fmt_p
function pval(v) { return v === null || v === undefined || !isFinite(v) ? "–" : (+v >= 1e-3 || +v === 0 ? (+v).toFixed(4) : (+v).toExponential(1)); }

// Panels: [title, ylabel, key predicate]. A panel is drawn only when some key has data,
// so a run never shows an empty panel, and reward is drawn once (from the store, with bands).
const PANELS = [
  ["held-out pass@1 per domain", "pass@1", k => k.startsWith("eval/pass@1/")],
  ["KL and entropy", "nats", k => /^train\/(kl|entropy)/.test(k)],
  ["step time by phase", "seconds", k => /^time\/.*_s$/.test(k)],
  ["sandbox and verifier throughput", "per second", k => /throughput|sandbox\/.*per_s|execs_per_s/.test(k)],
  ["infra-error and dropped-group rates", "fraction", k => ["infra_error_frac", "groups/dropped_frac", "groups/zero_variance_frac", "format_fail_frac"].includes(k)],
  ["staleness and logprob mismatch", "", k => /staleness|logprob_mismatch/.test(k)],
  ["training loss and grad norm", "", k => /^train\/(loss|grad_norm)$/.test(k)],
  ["reward-hacking detector scores", "score", k => /^detect\/.*\/score$/.test(k)],
  // only the shares that move (schedule.domain_shares: signal, or a task policy): a fixed mixture is flat lines
  ["share of draws by domain", "share", k => /^sched\/weight\/[^/]+$/.test(k), {movingOnly: true}],
  ["curriculum: difficulty level per domain", "level", k => k.startsWith("sched/difficulty")],
  ["curriculum: pass rate at each domain's level (the band's edges move it)", "pass rate", k => k.startsWith("sched/level_pass/")],
];

function smoothing() { return +document.getElementById("smooth").value; }

function metricSeries(rows, key) {
  const x = [], y = [];
  for (const r of rows) if (typeof r[key] === "number") { x.push(r.step); y.push(r[key]); }
  return {x, y};
}

function rewardPanel(curves, tag, dash, w) {
  const out = [];
  for (const dom of Object.keys(curves.reward || {}).sort()) {
    const c = curves.reward[dom];
    out.push({label: `${dom}${tag}`, base: dom, x: c.step, y: ema(c.mean, w), raw: c.mean, low: ema(c.low, w), high: ema(c.high, w), dash});
  }
  return out;
}

function drawCurves(container, entries) {
  // entries: [{curves, tag, dash}] -- one per run drawn (two when comparing)
  const w = smoothing(), el = document.getElementById(container);
  el.innerHTML = "";
  const add = (spec) => {
    // one colour per series name in both runs (the second run is dashed), so overlays pair up
    const names = [...new Set(spec.series.map(s => s.base || s.label))];
    for (const s of spec.series) s.color = PALETTE[names.indexOf(s.base || s.label) % PALETTE.length];
    const p = document.createElement("div"); p.className = "panel"; el.appendChild(p);
    if (!lineChart(p, spec)) el.removeChild(p);
  };
  add({title: `training reward per domain (EMA ${w}, 95% band)`, ylabel: "mean reward", series: entries.flatMap(e => rewardPanel(e.curves, e.tag, e.dash, w))});
  for (const [title, ylabel, pred, opts] of PANELS) {
    const series = [];
    for (const e of entries) {
      const rows = e.curves.metrics.concat(e.curves.derived || []);
      const keys = [...new Set(rows.flatMap(r => Object.keys(r)))].filter(pred).sort();
      for (const k of keys) {
        const s = metricSeries(rows, k);
        if (opts && opts.movingOnly && Math.min(...s.y) === Math.max(...s.y)) continue;
        const smooth = !k.startsWith("eval/") && !k.startsWith("sched/difficulty");  // levels are steps, not noise
        series.push({label: k + e.tag, base: k, x: s.x, y: smooth ? ema(s.y, w) : s.y, raw: smooth ? s.y : null, dash: e.dash});
      }
    }
    if (series.length) add({title, ylabel, series});
  }
}

async function loadCurves() {
  const ids = [state.a].concat(state.b !== null ? [state.b] : []);
  for (const i of ids) state.curves[i] = await api(`/api/runs/${i}/curves`);
  redrawCurves();
  const rows = state.curves[state.a].metrics;
  document.getElementById("live").textContent = rows.length ? `step ${rows[rows.length - 1].step} · ${rows.length} metric rows` : "no metrics yet";
}

function redrawCurves() {
  if (!state.curves[state.a]) return;
  const entries = [{curves: state.curves[state.a], tag: state.b !== null ? ` [${state.runs[state.a].label}]` : "", dash: false}];
  if (state.b !== null && state.curves[state.b]) entries.push({curves: state.curves[state.b], tag: ` [${state.runs[state.b].label}]`, dash: true});
  drawCurves("charts", entries);
  if (state.b !== null) drawCurves("compare-charts", entries);
}

function showTab(name) {
  state.tab = name;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("on", b.dataset.tab === name);
  for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== `tab-${name}`;
  refresh();
}

async function refresh() {
  try {
    if (state.tab === "curves" || state.tab === "compare") await loadCurves();
    if (state.tab === "trajectories") await window.trajTab.open();
    if (state.tab === "eval") await window.evalTab.evaluation();
    if (state.tab === "detectors") await window.evalTab.detectors();
    if (state.tab === "compare") await window.evalTab.compare();
    document.body.dataset.ready = state.tab;
  } catch (e) {
    document.getElementById("live").textContent = "error: " + e.message;
  }
}

async function init() {
  state.runs = await api("/api/runs");
  const a = document.getElementById("run-a"), b = document.getElementById("run-b");
  for (const r of state.runs) {
    a.add(new Option(r.label, r.id));
    b.add(new Option(r.label, r.id));
  }
  if (state.runs.length > 1) { b.value = "1"; state.b = 1; }
  a.onchange = () => { state.a = +a.value; window.trajTab.reset(); refresh(); };
  b.onchange = () => { state.b = b.value === "" ? null : +b.value; refresh(); };
  document.getElementById("smooth").oninput = (e) => { document.getElementById("smooth-v").textContent = e.target.value; redrawCurves(); };
  for (const btn of document.querySelectorAll("#tabs button")) btn.onclick = () => showTab(btn.dataset.tab);
  await refresh();
  // Follow a live run: curves re-read metrics.jsonl and the store every 5 s.
  state.timer = setInterval(() => { if (state.tab === "curves") loadCurves().catch(() => {}); }, 5000);
}

document.addEventListener("DOMContentLoaded", init);
