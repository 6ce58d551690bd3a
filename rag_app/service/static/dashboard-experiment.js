"use strict";
// The experiment page (#/experiment/NAME): one request, GET /v1/experiments/NAME?over_time=auto, the same
// computation `rag experiment compare --over-time --json` prints. Drawn as GrowthBook and Eppo draw a gray
// release: the primary metric's effect over time inside its anytime-valid band, with the zero and margin
// lines, so one sees when it became sure; each guardrail as a small chart with its status; what each arm
// served hour by hour; the ramp's moves and the verdict's history. Plain SVG, no library, no build step;
// it uses the helpers of dashboard.html (api, esc, usd, t, ...), loaded before it runs.

const ARM_COLORS = {control: "#4477aa", treatment: "#ee6677"};
const VERDICT_COLORS = {"promote": "#228833", "hold": "#bbbbbb", "roll back": "#cc3311"};
const STATUS_CLASS = {"better": "st-better", "worse": "st-worse", "no difference established": "st-unclear",
                      "not enough data": "st-nodata", "cost unknown (unpriced queries)": "st-unknown"};
const METRIC_LABELS = {  // a metric the page does not know yet (a new guardrail) shows by its own name
  cost_per_query: "cost per query", latency_ms: "latency", error_rate: "error rate", timeout_rate: "timeout rate",
  retry_rate: "retry rate", groundedness: "groundedness", refusal_rate: "refusal rate",
  invalid_citation_rate: "answers with an invalid citation", judge_score: "judge score",
  judge_faithfulness: "judge faithfulness", feedback_score: "feedback score"};
const metricLabel = (m) => t(METRIC_LABELS[m] || m.replace(/_/g, " "));
const HOUR = 3600e3, DAY = 24 * HOUR;
const TCHART = {W: 640, H: 230, l: 84, r: 14, t: 12, b: 40};

// one number of a metric in its unit, for an axis: dollars, ms, percentage points or a score
function unitTick(unit) {
  if (unit === "usd") return (v) => usd(v);
  if (unit === "ms") return (v) => Number(v).toFixed(0);
  if (unit === "score") return (v) => Number(v).toFixed(2);
  return (v) => (100 * v).toFixed(Math.abs(v) < 0.1 ? 1 : 0);
}
const unitName = (unit) => ({usd: "USD", ms: "ms", score: "score -1..1"}[unit] || t("percentage points"));

function niceRange(lo, hi, n = 4) {  // round ticks covering [lo, hi] and 0, in steps of 1, 2, 2.5 or 5 x 10^k
  lo = Math.min(lo, 0); hi = Math.max(hi, 0);
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(s => s >= raw * (1 - 1e-9));
  const out = [];
  for (let v = Math.floor(lo / step + 1e-9) * step; out.length < 2 || out[out.length - 1] < hi - step * 1e-9; v += step)
    out.push(+v.toPrecision(12) || 0);  // never "-0"
  return out;
}

function timeTicks(x0, x1) {  // round UTC times between x0 and x1: at most ~6 labels
  const steps = [HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 14 * DAY, 30 * DAY];
  const step = steps.find(s => (x1 - x0) / s <= 6) || 60 * DAY;
  const out = [];
  for (let v = Math.ceil(x0 / step) * step; v <= x1; v += step) out.push(v);
  const iso = (v) => new Date(v).toISOString();
  return out.map(v => ({v, label: step < DAY ? (new Date(v).getUTCHours() === 0 || v === out[0]
    ? iso(v).slice(5, 10) + " " : "") + iso(v).slice(11, 16) : iso(v).slice(5, 10)}));
}

// A chart over time: x in UTC milliseconds, y in one unit (which may be negative: a difference). `band`:
// {xs, lo, hi} drawn where both bounds are known; `lines`: [{xs, ys, color, dash, cls, key}] with a point
// each (data-at); `hlines`: [{y, cls, label}]; `vlines`: [{x, label}]; `strip`: verdict segments under the plot.
function timeChart({x0, x1, band, lines = [], hlines = [], vlines = [], strip, fmt, yTitle, label, W = TCHART.W, H = TCHART.H}) {
  const {l, r, t: top} = TCHART, h = H, b = TCHART.b + (strip ? 10 : 0);
  const vals = [...lines.flatMap(s => s.ys), ...(band ? [...band.lo, ...band.hi] : []), ...hlines.map(x => x.y)]
    .filter(v => v !== null && v !== undefined && isFinite(v));
  const ticks = niceRange(Math.min(...vals, 0), Math.max(...vals, 0));
  const ylo = ticks[0], yhi = ticks[ticks.length - 1];
  const X = (v) => l + (x1 > x0 ? (v - x0) / (x1 - x0) : 0.5) * (W - l - r);
  const Y = (v) => top + (h - top - b) * (1 - (v - ylo) / (yhi - ylo));
  let svg = ticks.map(v => `<line x1="${l}" x2="${W - r}" y1="${Y(v)}" y2="${Y(v)}" stroke="#eee"/>
    <text class="tick y-tick" x="${l - 4}" y="${Y(v) + 4}" text-anchor="end">${esc(fmt(v))}</text>`).join("");
  svg += `<line x1="${l}" x2="${l}" y1="${top}" y2="${h - b}" stroke="#999"/>
    <text class="axis-title y-title" transform="translate(12 ${(top + h - b) / 2}) rotate(-90)" text-anchor="middle">${esc(yTitle)}</text>`;
  svg += timeTicks(x0, x1).map(k => `<line x1="${X(k.v)}" x2="${X(k.v)}" y1="${h - b}" y2="${h - b + 4}" stroke="#999"/>
    <text class="tick x-tick" x="${X(k.v)}" y="${h - b + 15}" text-anchor="${X(k.v) > W - r - 30 ? "end" : X(k.v) < l + 30 ? "start" : "middle"}">${esc(k.label)}</text>`).join("");
  svg += `<text class="axis-title x-title" x="${(l + W - r) / 2}" y="${h - 4}" text-anchor="middle">${esc(t("time (UTC)"))}</text>`;
  if (band) {  // one polygon per run of points with an interval
    let run = [];
    const flush = () => {
      if (run.length) svg += `<polygon class="band" fill="#4477aa" fill-opacity="0.18" stroke="none" data-from="${run[0][0]}" data-to="${run[run.length - 1][0]}"
        points="${[...run.map(p => `${X(p[0])},${Y(p[2])}`), ...run.slice().reverse().map(p => `${X(p[0])},${Y(p[1])}`)].join(" ")}"/>`;
      run = [];
    };
    band.xs.forEach((x, i) => { if (band.lo[i] === null || band.hi[i] === null) flush(); else run.push([x, band.lo[i], band.hi[i]]); });
    flush();
  }
  for (const hl of hlines) {
    if (hl.y === null || hl.y === undefined || !isFinite(hl.y)) continue;
    svg += `<line class="${hl.cls}" x1="${l}" x2="${W - r}" y1="${Y(hl.y)}" y2="${Y(hl.y)}" stroke="${hl.cls === "zero" ? "#555" : "#aa3377"}"${hl.cls === "zero" ? "" : ` stroke-dasharray="5 3"`}/>`
      + (hl.label ? `<text class="hline-label" x="${W - r - 2}" y="${Y(hl.y) - 3}" text-anchor="end">${esc(hl.label)}</text>` : "");
  }
  for (const vl of vlines) svg += `<line class="ramp-move" x1="${X(vl.x)}" x2="${X(vl.x)}" y1="${top}" y2="${h - b}" stroke="#888" stroke-dasharray="2 3"/>
    <text class="ramp-label" x="${X(vl.x) + 3}" y="${top + 10}">${esc(vl.label)}</text>`;
  for (const s of lines) {
    let pts = [];
    const flush = () => { if (pts.length > 1) svg += `<polyline class="${s.cls || "series"}" fill="none" stroke="${s.color}" stroke-width="1.8"${s.dash ? ` stroke-dasharray="4 3"` : ""} points="${pts.join(" ")}"/>`; pts = []; };
    s.xs.forEach((x, i) => {
      const v = s.ys[i];
      if ((v === null || v === undefined) && s.hollow) {  // a point with queries but too few to say: hollow, on 0
        flush();
        svg += `<circle class="pt nodata" data-key="${esc(s.key)}" data-at="${esc(s.at[i])}" cx="${X(x)}" cy="${Y(0)}" r="2.4" fill="#fff" stroke="${s.color}"><title>${esc(s.title(i))}</title></circle>`;
        return;
      }
      if (v === null || v === undefined) { flush(); return; }
      pts.push(`${X(x)},${Y(v)}`);
      svg += `<circle class="pt" data-key="${esc(s.key)}" data-at="${esc(s.at[i])}" cx="${X(x)}" cy="${Y(v)}" r="2.4" fill="${s.color}"><title>${esc(s.title(i))}</title></circle>`;
    });
    flush();
  }
  if (strip) {  // the verdict at each point, as a coloured strip under the plot
    const y = h - TCHART.b + 2;
    svg += strip.xs.map((x, i) => {
      const from = i ? (strip.xs[i - 1] + x) / 2 : x0, to = i + 1 < strip.xs.length ? (x + strip.xs[i + 1]) / 2 : x1;
      return `<rect class="verdict-seg" data-verdict="${esc(strip.values[i])}" x="${X(from)}" y="${y - 12}" width="${Math.max(0.5, X(to) - X(from))}" height="6" fill="${VERDICT_COLORS[strip.values[i]] || "#bbb"}"><title>${esc(strip.at[i])}: ${esc(t(strip.values[i]))}</title></rect>`;
    }).join("");
  }
  return `<svg viewBox="0 0 ${W} ${h}" width="100%" role="img" aria-label="${esc(label)}">${svg}</svg>`;
}

// the line a metric must clear: where promote needs the primary's band (cost: below -min_cost_drop_pct of the
// control's cost), or where a guardrail is worse (a quality margin, the error rate's tolerance)
function marginLine(e, m, r) {
  if (m === "cost_per_query" && r.role === "primary") {
    const a = e.arms.control[e.cost_metric === "shadow_cost_usd" ? "shadow_cost_per_query" : "cost_per_query"];
    const pct = e.guardrails.min_cost_drop_pct;
    return a && a.mean ? {y: -pct / 100 * a.mean, cls: "margin", label: `−${pct}% ${t("of control")}`} : null;
  }
  const tol = r.margin ?? r.tolerance;
  if (tol === undefined || tol === null) return null;
  return {y: r.better === "higher" ? -tol : tol, cls: "margin", label: `${t("margin")} ${metricValue(r.better === "higher" ? -tol : tol, r.unit, true)}`};
}

function effectChart(e, s, m, xs, x0, x1, big) {
  const r = e.metrics[m], col = s.metrics[m], fmt = unitTick(r.unit);
  const vlines = big && e.ramp ? e.ramp.events.map(ev => ({x: Date.parse(ev.at), label: `→${ev.to_pct}%`})) : [];
  return timeChart({x0, x1, fmt, W: big ? 1240 : 380, H: big ? 300 : 190, yTitle: `${big ? t("treatment − control") : "t − c"} (${unitName(r.unit)})`,
    label: `${metricLabel(m)}: treatment minus control over time, with its interval`,
    band: {xs, lo: col.low, hi: col.high},
    lines: [{xs, ys: col.diff, at: s.at, key: m, color: "#224488", cls: "effect", hollow: true,
             title: (i) => `${when2(s.at[i], s.every)} · ${metricValue(col.diff[i], r.unit, true)} [${metricValue(col.low[i], r.unit, true)}, ${metricValue(col.high[i], r.unit, true)}] · ${t(col.status[i])}`}],
    hlines: [{y: 0, cls: "zero"}, marginLine(e, m, r)].filter(Boolean), vlines,
    strip: big ? {xs, values: s.verdict, at: s.at.map(a => when2(a, s.every))} : null});
}

const when2 = (at, every) => every === "day" ? at.slice(0, 10) : at.slice(0, 16).replace("T", " ");

function armChart(e, s, key, fmt, yTitle, label, xs, x0, x1) {
  const arms = Object.keys(s.arms);
  return timeChart({x0, x1, fmt, yTitle, label, W: 600, H: 220,
    lines: arms.map(a => ({xs, ys: s.arms[a][key], at: s.at, key: a, color: ARM_COLORS[a], cls: "arm-" + a,
      title: (i) => `${a} ${when2(s.at[i], s.every)} · ${s.arms[a][key][i] === null ? "–" : fmt(s.arms[a][key][i])} (${s.arms[a].queries[i]} ${t("queries")})`}))})
    + `<div class="legend">${arms.map(a => `<span><i style="background:${ARM_COLORS[a]}"></i>${esc(t(a))} (${esc(e.arms[a].variant)})</span>`).join("")}<span>${esc(t("each point: that hour's (day's) own queries"))}</span></div>`;
}

async function experimentView(name) {
  const e = await api("/v1/experiments/" + encodeURIComponent(name) + "?over_time=auto");
  const s = e.over_time, metric = e.cost_metric === "shadow_cost_usd" ? "shadow_cost_per_query" : "cost_per_query";
  const step = s.every === "hour" ? HOUR : DAY;
  const xs = s.at.map(a => Date.parse(a) + step);  // each point: cumulative to the end of its hour (day)
  const x0 = s.at.length ? Date.parse(s.at[0]) : 0, x1 = xs.length ? xs[xs.length - 1] : 1;
  const primary = e.analysis.primary_metric, p = e.metrics[primary];
  const guards = Object.keys(e.metrics).filter(m => m !== primary);
  const arms = e.arms, a = e.analysis;
  const since = (m) => s.metrics && s.metrics[m] && s.metrics[m].since ? when2(s.metrics[m].since, s.every) : null;
  const statusLine = (m) => { const r = e.metrics[m]; return `<span class="status ${STATUS_CLASS[r.status] || ""}">${esc(t(r.status))}</span>${since(m) && ["better", "worse"].includes(r.status) ? ` <span class="muted">${esc(t("since"))} ${esc(since(m))}</span>` : ""}`; };
  const interval = (r) => r.low === null ? "–" : `${metricValue(r.diff, r.unit, true)} [${metricValue(r.low, r.unit, true)}, ${metricValue(r.high, r.unit, true)}]`;
  const view = document.getElementById("view");
  view.innerHTML = `<p><a href="#/">← ${esc(t("queries"))}</a></p>
    <div class="exp-head"><h2>${esc(t("experiment"))} ${esc(e.experiment)}</h2>
      <span class="verdict-badge" data-verdict="${esc(e.verdict)}" style="background:${VERDICT_COLORS[e.verdict] || "#bbb"}">${esc(t(e.verdict))}</span></div>
    <p class="muted" id="exp-meta">${esc(e.mode)} · ${e.rollout_pct}% ${esc(t("treatment"))} · ${esc(arms.control.variant)} → ${esc(arms.treatment.variant)} ·
      ${esc(a.method)} (${esc(a.method === "fixed" ? t("fixed-horizon") : t("anytime-valid"))}), alpha ${a.alpha} · ${esc(t("cost metric"))} ${esc(e.cost_metric)} ·
      ${esc(t("prices"))} ${e.prices === "repriced" ? `${esc(t("re-priced"))} (${e.repriced_rows})` : esc(t("as recorded"))}</p>
    <div class="verdict" id="verdict">verdict: ${esc(e.verdict)}</div><p id="verdict-reason">${esc(e.reason)}</p>
    <p id="srm">${e.srm ? `${esc(t("sample ratio check"))} p = ${e.srm.pvalue === null ? "–" : Number(e.srm.pvalue).toPrecision(3)} ${e.srm.flagged ? "<b class=err>MISMATCH</b>" : "ok"}` : esc(t("shadow mode: no split to check"))}</p>
    ${s.at.length ? "" : `<p class="muted" id="exp-empty">${esc(t("no queries in this experiment yet"))}</p>`}
    <div class="chart wide" id="chart-effect"><h3>${esc(metricLabel(primary))} (${esc(t("primary"))}): ${esc(t("treatment − control over time"))} · ${statusLine(primary)}</h3>
      ${s.at.length ? effectChart(e, s, primary, xs, x0, x1, true) : ""}
      <div class="legend"><span><i style="background:#224488"></i>${esc(t("difference"))}</span><span>${esc(t("hollow: too few queries yet"))}</span><span><i style="background:#4477aa;opacity:.3"></i>${esc(s.valid_at_every_point ? t("anytime-valid interval") : t("fixed-horizon interval (valid read once)"))}</span>
        <span>${esc(t("dashed: the margin to clear"))}</span>${e.ramp ? `<span>${esc(t("dotted: ramp moves"))}</span>` : ""}
        <span>${esc(t("strip: verdict at each point"))} (${Object.keys(VERDICT_COLORS).map(v => `<b style="color:${VERDICT_COLORS[v]}">${esc(t(v))}</b>`).join(" / ")})</span></div>
      <p class="muted">${esc(t("now"))}: ${esc(interval(p))} · ${s.at.length} ${esc(t(s.every === "hour" ? "points, one per hour with queries, cumulative" : "points, one per day with queries, cumulative"))}</p></div>
    <h3>${esc(t("guardrails"))}</h3>
    <div class="guardrails" id="guardrails">${guards.map(m => `<div class="chart guard" data-metric="${esc(m)}"><h3>${esc(metricLabel(m))} · ${statusLine(m)}</h3>
      ${s.at.length ? effectChart(e, s, m, xs, x0, x1, false) : ""}<p class="muted">${esc(interval(e.metrics[m]))} · ${esc(t(e.metrics[m].better + " is better"))}</p></div>`).join("")}</div>
    <div class="charts" id="arm-charts">
      <div class="chart" id="chart-arm-cost"><h3>${esc(t("cost per query per"))} ${esc(t(s.every))}, ${esc(t("by arm"))}</h3>${s.at.length ? armChart(e, s, "cost_per_query", usd, t("cost per query (USD)"), "cost per query per bucket and arm, USD", xs, x0, x1) : ""}</div>
      <div class="chart" id="chart-arm-grounded"><h3>${esc(t("groundedness per"))} ${esc(t(s.every))}, ${esc(t("by arm"))}</h3>${s.at.length ? armChart(e, s, "groundedness", (v) => (100 * v).toFixed(0) + "%", t("mean groundedness (%)"), "mean groundedness per bucket and arm, percent", xs, x0, x1) : ""}</div>
    </div>
    <div class="tables">
    <div class="scroll"><table id="arms"><thead><tr><th>${esc(t("arm"))}</th><th>${esc(t("variant"))}</th><th class="num">${esc(t("queries"))}</th><th class="num">${esc(t("cost/query"))}</th><th class="num">p95</th>
      <th class="num">${esc(t("latency p50"))}</th><th class="num">p95</th><th class="num">${esc(t("errors"))}</th><th class="num">${esc(t("grounded"))}</th><th class="num">${esc(t("refused"))}</th><th class="num">${esc(t("scored"))}</th></tr></thead><tbody>
    ${Object.entries(arms).map(([arm, x]) => `<tr data-arm="${arm}"><td>${esc(t(arm))}</td><td class="wrap">${esc(x.variant)}</td><td class="num">${x.queries}</td>
      <td class="num">${x[metric].mean === null && x.unpriced_queries ? "unpriced" : usd(x[metric].mean)}</td><td class="num">${usd(x[metric].p95)}</td>
      <td class="num">${ms(x.latency_ms.p50)}</td><td class="num">${ms(x.latency_ms.p95)}</td><td class="num">${pct(x.error_rate)}</td>
      <td class="num">${x.quality && x.quality.scored ? pct(x.quality.groundedness) : "–"}</td><td class="num">${x.quality && x.quality.refusal_rate != null ? pct(x.quality.refusal_rate) : "–"}</td>
      <td class="num">${x.quality ? x.quality.scored : "–"}</td></tr>`).join("")}</tbody></table></div>
    <div class="scroll"><table id="metrics"><thead><tr><th>${esc(t("metric"))}</th><th>${esc(t("role"))}</th><th class="num">${esc(t("treatment − control"))}</th><th class="num">${esc(t("interval"))}</th><th>${esc(t("status"))}</th></tr></thead><tbody>
    ${Object.entries(e.metrics).map(([m, r]) => `<tr data-metric="${esc(m)}"><td>${esc(m)}</td><td>${esc(t(r.role))} · ${esc(t(r.better))}${r.margin != null ? ` (${esc(t("margin"))} ${metricValue(r.margin, r.unit, false)})` : ""}</td>
      <td class="num">${metricValue(r.diff, r.unit, true)}</td><td class="num">${r.low === null ? "–" : `[${metricValue(r.low, r.unit, true)}, ${metricValue(r.high, r.unit, true)}]`}</td><td>${statusLine(m)}</td></tr>`).join("")}</tbody></table></div>
    </div>
    <p id="diff" class="muted">${e.differences.cost_per_query ? `${esc(t("one-look 95% interval of the cost difference"))} ${usd(e.differences.cost_per_query.diff)} [${usd(e.differences.cost_per_query.ci95_low)}, ${usd(e.differences.cost_per_query.ci95_high)}] (${esc(t("valid read once"))})` : esc(t("not enough data for a confidence interval"))}</p>
    ${e.ramp ? `<h3 id="ramp-title">${esc(t("ramp"))} ${e.ramp.steps.map(x => x + "%").join(" → ")}</h3><p id="ramp">${esc(t("serving"))} ${e.ramp.rollout_pct}% ${esc(t("since"))} ${esc(e.ramp.step_started_at || t("the start"))}${e.ramp.last_look ? ` · ${esc(t("last look"))}: ${esc(e.ramp.last_look.reason)}` : ""}</p>
      <div class="scroll"><table id="ramp-moves"><thead><tr><th>${esc(t("at (UTC)"))}</th><th>${esc(t("move"))}</th><th class="num">${esc(t("from"))}</th><th class="num">${esc(t("to"))}</th><th>${esc(t("why"))}</th></tr></thead><tbody>
      ${e.ramp.events.length ? e.ramp.events.map(x => `<tr><td>${esc(x.at.slice(0, 16).replace("T", " "))}</td><td>${esc(t(x.action))}</td><td class="num">${x.from_pct}%</td><td class="num">${x.to_pct}%</td><td class="wrap">${esc(x.reason)}</td></tr>`).join("")
        : `<tr><td colspan="5" class="muted">${esc(t("no move yet"))}</td></tr>`}</tbody></table></div>` : ""}
    <h3>${esc(t("verdict history"))}</h3><div class="scroll"><table id="verdict-history"><thead><tr><th>${esc(t("from (UTC)"))}</th><th>${esc(t("verdict"))}</th><th>${esc(t("decided by"))}</th><th>${esc(t("why, then"))}</th></tr></thead><tbody>
    ${(s.verdict_changes || []).map(c => `<tr data-verdict="${esc(c.verdict)}"><td>${esc(when2(c.at, s.every))}</td><td><b style="color:${VERDICT_COLORS[c.verdict]}">${esc(t(c.verdict))}</b></td><td>${esc(c.decided_by)}</td><td class="wrap">${esc(c.reason)}</td></tr>`).join("")}</tbody></table></div>`;
}
