// Trajectory browser: filters -> paginated table -> one trajectory -> its group.
"use strict";
const traj = {offset: 0, limit: 50, total: 0, facetsFor: null};

function filterQuery() {
  const q = new URLSearchParams();
  for (const [k, v] of new FormData(document.getElementById("filters"))) if (v !== "") q.set(k, v);
  q.set("offset", traj.offset); q.set("limit", traj.limit);
  return q.toString();
}

async function loadFacets() {
  if (traj.facetsFor === state.a) return;
  const kindSel = document.getElementById("f-kind");
  const f = await api(`/api/runs/${state.a}/facets?kind=${encodeURIComponent(kindSel.value || "train")}`);
  const dom = document.getElementById("f-domain");
  dom.innerHTML = '<option value="">all</option>' + f.domains.map(d => `<option>${esc(d)}</option>`).join("");
  const current = kindSel.value;
  kindSel.innerHTML = (f.kinds.length ? f.kinds : ["train"]).map(k => `<option>${esc(k)}</option>`).join("");
  if (f.kinds.includes(current)) kindSel.value = current;
  traj.facetsFor = state.a;
}

async function loadPage() {
  const t0 = performance.now();
  const page = await api(`/api/runs/${state.a}/trajectories?${filterQuery()}`);
  traj.total = page.total;
  const rows = page.rows.map(r => `<tr class="row" data-key="${esc(r.kind)}/${r.step}/${r.grp}/${r.sample}">
    <td class="num">${r.step}</td><td class="num">${r.grp}</td><td class="num">${r.sample}</td><td>${esc(r.task_id)}</td>
    <td>${esc(r.domain)}</td><td class="num ${r.passed ? "pass" : "fail"}">${num(r.reward)}</td>
    <td class="num">${num(r.advantage, 2)}</td><td class="num">${r.weights_version}</td><td>${esc(r.status)}</td>
    <td><code>${esc(r.preview)}</code></td></tr>`).join("");
  const table = document.getElementById("traj-table");
  table.innerHTML = `<tr><th>step</th><th>group</th><th>sample</th><th>task</th><th>domain</th><th>reward</th><th>advantage</th><th>version</th><th>status</th><th>completion</th></tr>${rows}`;
  for (const tr of table.querySelectorAll("tr.row")) tr.onclick = () => openTrajectory(tr.dataset.key);
  const last = Math.min(traj.offset + traj.limit, traj.total);
  document.getElementById("traj-count").textContent = `${traj.total} trajectories match`;
  document.getElementById("page").textContent = traj.total ? `${traj.offset + 1}–${last} of ${traj.total}` : "none";
  document.body.dataset.filterMs = (performance.now() - t0).toFixed(1);
}

function shade(lp) {
  // probability 1 -> white, 0 -> red: low-confidence tokens stand out
  const p = Math.exp(lp), g = Math.round(255 * p);
  return `rgb(255,${g},${g})`;
}

function turnHtml(t) {
  let body;
  if (t.pieces && t.pieces.length) {
    body = '<pre class="tokens">' + t.pieces.map((s, i) => `<span style="background:${shade(t.logprobs[i])}" title="logprob ${num(t.logprobs[i], 3)}">${esc(s)}</span>`).join("") + "</pre>";
  } else {
    body = `<pre>${esc(t.text)}</pre>`;
  }
  let extra = "";
  if (t.tool_call) extra += `<div><b>tool call</b> <code>${esc(t.tool_call.name)}</code> <pre>${esc(JSON.stringify(t.tool_call.arguments, null, 1))}</pre></div>`;
  const x = t.exec_result;
  if (x) {
    const files = (x.files_changed || []).map(f => `${esc(f.change)} ${esc(f.path)} (${f.size} B)`).join("<br>") || "none";
    extra += `<div><b>sandbox</b> status ${esc(x.status)}, exit code ${esc(x.exit_code)}, ${num(x.wall_s, 3)} s
      <div class="pair"><div>stdout<pre>${esc(x.stdout)}</pre></div><div>stderr<pre>${esc(x.stderr)}</pre></div></div>
      files changed: ${files}</div>`;
  }
  return `<div class="card"><b>${esc(t.role)}</b>${t.trainable ? "" : ' <span class="muted">(observation, masked)</span>'}${body}${extra}</div>`;
}

async function openTrajectory(key) {
  const t = await api(`/api/runs/${state.a}/trajectory/${key}`);
  const [kind, step, grp] = key.split("/");
  const v = t.verify || {};
  document.getElementById("detail").innerHTML = `<h3>${esc(t.task_id)} · step ${t.step} · group ${t.group} · sample ${t.sample}</h3>
    <p>domain ${esc(t.domain)} · weights version ${t.weights_version} · reward <b>${num(t.reward)}</b> · advantage ${num(t.advantage, 3)} · finish ${esc(t.finish_reason)}
    <button id="open-group">Open group</button></p>
    <div class="card"><b>prompt</b><pre>${esc(t.prompt || "(prompt not pinned in this run)")}</pre></div>
    ${t.turns.map(turnHtml).join("")}
    <div class="card"><b>verifier</b> score ${num(v.score)} · passed ${esc(v.passed)} · status ${esc(v.status)} ${v.reason ? "· " + esc(v.reason) : ""}
    <pre>${esc(JSON.stringify(v.details || {}, null, 1))}</pre>${t.error ? `<b>error</b> ${esc(t.error.boundary)}: ${esc(t.error.message)}` : ""}</div>`;
  document.getElementById("open-group").onclick = () => openGroup(kind, step, grp);
  document.getElementById("detail").scrollIntoView();
}

function groupHtml(g, title) {
  const cells = g.samples.map(s => `<div class="card sample"><b>sample ${s.sample}</b> reward <span class="${s.passed ? "pass" : "fail"}">${num(s.reward)}</span>
     · advantage <b>${num(s.advantage, 2)}</b> · v${s.weights_version}<pre>${esc(s.completion)}</pre></div>`).join("");
  return `<h3>${esc(title)}</h3><div class="card"><b>prompt</b><pre>${esc(g.prompt || "")}</pre></div><div class="groupgrid">${cells || '<p class="muted">no samples</p>'}</div>`;
}

async function openGroup(kind, step, grp) {
  const g = await api(`/api/runs/${state.a}/group/${kind}/${step}/${grp}`);
  const el = document.getElementById("detail");
  el.innerHTML = `<div id="group-view">${groupHtml(g, `group ${grp} of step ${step}: ${g.task_id} (${g.samples.length} samples)`)}</div>`;
  el.scrollIntoView();
}

window.trajTab = {
  async open() { await loadFacets(); await loadPage(); },
  reset() { traj.facetsFor = null; traj.offset = 0; document.getElementById("detail").innerHTML = ""; },
  groupHtml,
};

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("filters").onsubmit = (e) => { e.preventDefault(); traj.offset = 0; loadPage(); };
  document.getElementById("f-kind").onchange = () => { traj.facetsFor = null; traj.offset = 0; window.trajTab.open(); };
  document.getElementById("prev").onclick = () => { traj.offset = Math.max(0, traj.offset - traj.limit); loadPage(); };
  document.getElementById("next").onclick = () => { if (traj.offset + traj.limit < traj.total) { traj.offset += traj.limit; loadPage(); } };
});
