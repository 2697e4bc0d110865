// Eval results, detector findings, and the two-run comparison.
"use strict";

function ci(pair) { return pair ? `[${num(pair[0])}, ${num(pair[1])}]` : ""; }

function flipsHtml(flips) {
  if (!flips.length) return '<p class="muted">No flips.</p>';
  return flips.map(f => `<details class="card flip"><summary><b>${esc(f.direction)}</b> ${esc(f.task_id)} (${esc(f.domain)})</summary>
    <b>prompt</b><pre>${esc(f.prompt || "(prompt not recorded)")}</pre>
    <div class="pair"><div>A (before)<pre>${esc(f.completion_a || "(completion not recorded)")}</pre></div>
    <div>B (after)<pre>${esc(f.completion_b || "(completion not recorded)")}</pre></div></div></details>`).join("");
}

function beforeAfterHtml(e) {
  const rows = e.rows.map(r => `<tr><td>${esc(r.domain)}</td><td class="num">${r.n}</td>
    <td class="num">${num(r.before)} ${ci(r.before_ci)}</td><td class="num">${num(r.after)} ${ci(r.after_ci)}</td>
    <td class="num">${r.after === null || r.before === null ? "–" : (r.after - r.before >= 0 ? "+" : "") + num(r.after - r.before)}</td>
    <td class="num">${r.pass_to_fail} / ${r.fail_to_pass}</td><td class="num">${pval(r.p_value)}</td></tr>`).join("");
  return `<h3>Held-out pass@1, ${esc(e.labels[0])} → ${esc(e.labels[1])} (95% Wilson intervals, exact McNemar)</h3>
    <table class="grid" id="eval-table"><tr><th>domain</th><th>tasks</th><th>${esc(e.labels[0])}</th><th>${esc(e.labels[1])}</th><th>Δ</th><th>P→F / F→P</th><th>p</th></tr>${rows}</table>
    <h3>Flips (${e.flips.length})</h3>${flipsHtml(e.flips)}`;
}

function suiteHtml(e) {
  const s = e.summary || {};
  return `<h3>Eval suite ${esc((e.meta || {}).suite || "")}</h3><pre>${esc(JSON.stringify(s, null, 1))}</pre>`;
}

function compareHtml(c) {
  const doms = Object.values(c.domains).concat([c.overall]);
  const rows = doms.map(d => `<tr class="${esc(d.verdict)}"><td>${esc(d.domain)}</td><td class="num">${d.pairs}</td>
    <td class="num">${num(d.pass_before)}</td><td class="num">${num(d.pass_after)}</td><td class="num">${num(d.diff)} [${num(d.ci[0])}, ${num(d.ci[1])}]</td>
    <td class="num">${pval(d.p_value)} / ${pval(d.p_holm)}</td><td>${esc(d.method)}</td><td>${esc(d.verdict)}</td></tr>`).join("");
  const flips = Object.values(c.domains).flatMap(d => d.flips);
  return `<h3>Paired comparison: verdict <b>${esc(c.verdict)}</b></h3>
    <table class="grid"><tr><th>domain</th><th>pairs</th><th>pass A</th><th>pass B</th><th>B − A [95% CI]</th><th>p / Holm</th><th>test</th><th>verdict</th></tr>${rows}</table>
    <h3>Flips (${flips.length})</h3>${flipsHtml(flips)}`;
}

async function evaluation() {
  const e = await api(`/api/runs/${state.a}/eval`);
  const el = document.getElementById("eval");
  el.innerHTML = e.kind === "before_after" ? beforeAfterHtml(e) : e.kind === "suite" ? suiteHtml(e) : '<p class="muted">This run has no evaluation results yet.</p>';
}

async function detectors() {
  const fs = await api(`/api/runs/${state.a}/detectors`);
  document.getElementById("detectors").innerHTML = "<h3>Reward-hacking detectors</h3>" + fs.map(f => `<div class="card detector ${f.alarm ? "alarm" : f.enough_data ? "quiet" : "thin"}">
    <b>${esc(f.detector)}</b>: ${f.alarm ? "<b>ALARM</b>" : f.enough_data ? "no alarm" : "not enough data"} · score ${num(f.score)} (threshold ${num(f.threshold)})
    <div>${esc(f.message)}</div>${f.examples.length ? `<pre>${esc(JSON.stringify(f.examples, null, 1))}</pre>` : ""}</div>`).join("");
}

async function compare() {
  const note = document.getElementById("compare-note");
  if (state.b === null) { note.textContent = "Pick a second run in 'compare with' to overlay its curves."; return; }
  note.innerHTML = `<b>${esc(state.runs[state.a].label)}</b> (solid) vs <b>${esc(state.runs[state.b].label)}</b> (dashed)`;
  const c = await api(`/api/compare?a=${state.a}&b=${state.b}`);
  const ea = await api(`/api/runs/${state.a}/eval`), eb = await api(`/api/runs/${state.b}/eval`);
  let html = "";
  if (c.kind !== "none") html = compareHtml(c);
  else if (ea.kind === "before_after" && eb.kind === "before_after") {
    html = `<div class="pair"><div><h4>${esc(state.runs[state.a].label)}</h4>${beforeAfterHtml(ea)}</div><div><h4>${esc(state.runs[state.b].label)}</h4>${beforeAfterHtml(eb)}</div></div>`;
  }
  document.getElementById("compare-eval").innerHTML = html;
}

async function sameTask(e) {
  e.preventDefault();
  const f = new FormData(e.target), task = f.get("task"), step = f.get("step") || 0;
  const out = document.getElementById("same-task-out");
  const parts = [];
  for (const i of [state.a, state.b]) {
    if (i === null) continue;
    const g = await api(`/api/runs/${i}/task/${encodeURIComponent(task)}?step=${step}`);
    parts.push(`<div>${window.trajTab.groupHtml(g, `${state.runs[i].label}: step ${g.step === undefined ? "–" : g.step}`)}</div>`);
  }
  out.innerHTML = parts.join("");
}

window.evalTab = {evaluation, detectors, compare};
document.addEventListener("DOMContentLoaded", () => { document.getElementById("same-task").onsubmit = sameTask; });
