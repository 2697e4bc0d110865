// SVG line charts with confidence bands; no dependencies.
// lineChart(el, {title, series: [{label, x: [], y: [], low?: [], high?: [], dash?}], xlabel, ylabel})
"use strict";
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const SVGNS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs, parent) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}

// Exponential moving average with bias correction (as TensorBoard's smoothing slider).
function ema(ys, weight) {
  if (!(weight > 0)) return ys.slice();
  const out = []; let acc = 0, n = 0;
  for (const y of ys) {
    if (y === null || !isFinite(y)) { out.push(null); continue; }
    acc = acc * weight + (1 - weight) * y; n += 1;
    out.push(acc / (1 - Math.pow(weight, n)));
  }
  return out;
}

// A span this small next to the values is a flat line drawn with rounding noise.
function flat(lo, hi) { return !(hi - lo > 1e-9 * Math.max(Math.abs(lo), Math.abs(hi), 1e-12)); }

function niceTicks(lo, hi, n) {
  if (flat(lo, hi)) { const c = lo; lo = c - (Math.abs(c) * 0.1 || 1); hi = c + (Math.abs(c) * 0.1 || 1); }
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw);
  const out = [];
  // counted, not compared: v += step can stop moving v when step is tiny next to v
  for (let i = 0, v = Math.ceil(lo / step) * step; i <= 2 * n + 2 && v <= hi + step * 1e-6; i++, v = Math.ceil(lo / step) * step + i * step) out.push(+v.toPrecision(10));
  return out;
}

function fmt(v) {
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(1) : String(+v.toPrecision(3));
}

function lineChart(el, spec) {
  const W = 460, H = 250, M = {l: 52, r: 10, t: 24, b: 34};
  el.innerHTML = "";
  const svg = svgEl("svg", {viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img"}, el);
  svgEl("text", {x: W / 2, y: 15, "text-anchor": "middle", class: "ctitle"}, svg).textContent = spec.title;
  const pts = [];
  for (const s of spec.series) s.x.forEach((x, i) => {
    for (const v of [s.y[i], s.low && s.low[i], s.high && s.high[i]]) if (v !== null && v !== undefined && isFinite(v)) pts.push([x, v]);
  });
  if (!pts.length) return false;
  let x0 = Math.min(...pts.map(p => p[0])), x1 = Math.max(...pts.map(p => p[0]));
  let y0 = Math.min(...pts.map(p => p[1])), y1 = Math.max(...pts.map(p => p[1]));
  if (flat(x0, x1)) { x0 -= 1; x1 += 1; }
  if (flat(y0, y1)) { const c = y0; y0 = c - (Math.abs(c) * 0.1 || 1); y1 = c + (Math.abs(c) * 0.1 || 1); }
  const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
  const sx = x => M.l + (x - x0) / (x1 - x0) * (W - M.l - M.r);
  const sy = y => H - M.b - (y - y0) / (y1 - y0) * (H - M.t - M.b);
  for (const t of niceTicks(y0, y1, 5)) {
    svgEl("line", {x1: M.l, x2: W - M.r, y1: sy(t), y2: sy(t), class: "grid"}, svg);
    svgEl("text", {x: M.l - 4, y: sy(t) + 3, "text-anchor": "end", class: "tick"}, svg).textContent = fmt(t);
  }
  for (const t of niceTicks(x0, x1, 6)) {
    svgEl("text", {x: sx(t), y: H - M.b + 13, "text-anchor": "middle", class: "tick"}, svg).textContent = fmt(t);
  }
  svgEl("text", {x: (W + M.l) / 2, y: H - 4, "text-anchor": "middle", class: "axis"}, svg).textContent = spec.xlabel || "step";
  if (spec.ylabel) svgEl("text", {x: 12, y: H / 2, transform: `rotate(-90 12 ${H / 2})`, "text-anchor": "middle", class: "axis"}, svg).textContent = spec.ylabel;
  svgEl("rect", {x: M.l, y: M.t, width: W - M.l - M.r, height: H - M.t - M.b, class: "frame"}, svg);
  const path = (xs, ys) => {
    let d = "", pen = false;
    xs.forEach((x, i) => {
      const y = ys[i];
      if (y === null || y === undefined || !isFinite(y)) { pen = false; return; }
      d += (pen ? "L" : "M") + sx(x).toFixed(1) + "," + sy(y).toFixed(1); pen = true;
    });
    return d;
  };
  spec.series.forEach((s, k) => {
    const color = s.color || PALETTE[k % PALETTE.length];
    if (s.low && s.high) {
      const ok = s.x.map((_, i) => isFinite(s.low[i]) && isFinite(s.high[i]));
      const xs = s.x.filter((_, i) => ok[i]);
      const top = xs.map((x, j) => [sx(x), sy(s.high.filter((_, i) => ok[i])[j])]);
      const bot = xs.map((x, j) => [sx(x), sy(s.low.filter((_, i) => ok[i])[j])]).reverse();
      if (top.length > 1) svgEl("polygon", {points: top.concat(bot).map(p => p.join(",")).join(" "), fill: color, class: "band"}, svg);
    }
    if (s.raw) svgEl("path", {d: path(s.x, s.raw), stroke: color, class: "raw"}, svg);
    const line = svgEl("path", {d: path(s.x, s.y), stroke: color, class: "line" + (s.dash ? " dash" : "")}, svg);
    svgEl("title", {}, line).textContent = s.label;
    if (s.x.length === 1) svgEl("circle", {cx: sx(s.x[0]), cy: sy(s.y[0]), r: 3, fill: color}, svg);
  });
  const lg = document.createElement("div"); lg.className = "legend";
  spec.series.forEach((s, k) => {
    const it = document.createElement("span");
    it.innerHTML = `<i style="background:${s.color || PALETTE[k % PALETTE.length]}"></i>`;
    it.appendChild(document.createTextNode(s.label)); lg.appendChild(it);
  });
  el.appendChild(lg);
  return true;
}
