/* harness report: renders the run's JSON blob (#report-data) with Chart.js.
 *
 * Data text is only ever set with textContent, never as HTML. The transcript table draws only
 * the rows in view (fixed row height), so 10,000 transcripts cost the same as 30. A transcript's
 * texts and judgments are inflated from their compressed chunk (DecompressionStream) only when its
 * row is opened. Charts are rebuilt with the page's colours when the colour scheme changes.
 */
(function () {
  "use strict";

  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var META = DATA.meta;
  var JF = {};
  DATA.judgment_fields.forEach(function (name, i) { JF[name] = i; });

  // ---- small helpers --------------------------------------------------------------------------

  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (k === "text") node.textContent = attrs[k];
        else if (k === "class") node.className = attrs[k];
        else node.setAttribute(k, attrs[k]);
      });
    }
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined) continue;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }
  function isNum(x) { return typeof x === "number" && isFinite(x); }
  function fmt(x, digits) {
    if (!isNum(x)) return "—";
    if (Number.isInteger(x)) return x.toLocaleString("en-US");
    return Number(x.toPrecision(digits || 3)).toLocaleString("en-US", { maximumFractionDigits: 6 });
  }
  function fmtInt(x) { return isNum(x) ? Math.round(x).toLocaleString("en-US") : "—"; }
  function fmtPct(x) { return isNum(x) ? (100 * x).toFixed(x > 0 && x < 0.001 ? 3 : 1) + "%" : "—"; }
  function fmtUsd(x) {
    if (x === null || x === undefined) return "unknown";
    if (x === 0) return "$0";
    return "$" + (x < 0.01 ? x.toPrecision(3) : x.toFixed(x < 100 ? 4 : 2));
  }
  function fmtMs(x) {
    if (!isNum(x)) return "—";
    return Number(x.toPrecision(3)) >= 1000 ? Number((x / 1000).toPrecision(3)) + " s" : Number(x.toPrecision(3)) + " ms";
  }
  function reasons(obj) {
    var keys = Object.keys(obj || {});
    return keys.length ? keys.map(function (k) { return k + " " + obj[k]; }).join(", ") : "";
  }
  function css(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
  function stat(label, value, small) {
    return el("div", { class: "stat" }, el("div", { class: "k", text: label }), el("div", { class: "v" + (small ? " small" : ""), text: value }));
  }
  function table(headers, rows, numeric) {
    var t = el("table", { class: "grid" });
    var tr = el("tr");
    headers.forEach(function (h, i) { tr.appendChild(el("th", { class: numeric && numeric[i] ? "num" : "", text: h })); });
    t.appendChild(el("thead", null, tr));
    var body = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (v, i) { row.appendChild(el("td", { class: numeric && numeric[i] ? "num" : "", text: String(v) })); });
      body.appendChild(row);
    });
    t.appendChild(body);
    // A wide table scrolls inside its own box, never the page.
    return el("div", { class: "scroll" }, t);
  }

  // ---- charts ---------------------------------------------------------------------------------

  var specs = [];
  function addChart(parent, make, height) {
    var box = el("div", { class: "chart" });
    if (height) box.style.height = height + "px";
    var canvas = el("canvas", { role: "img" });
    box.appendChild(canvas);
    parent.appendChild(box);
    specs.push({ canvas: canvas, make: make, chart: null });
  }
  function theme() {
    var colors = [];
    for (var i = 1; i <= 8; i++) colors.push(css("--c" + i));
    return { fg: css("--fg"), muted: css("--muted"), grid: css("--grid"), colors: colors };
  }
  function barChart(t, labels, datasets, opts) {
    opts = opts || {};
    return {
      type: "bar",
      data: {
        labels: labels,
        datasets: datasets.map(function (d, i) {
          return {
            label: d.label, data: d.data, backgroundColor: d.color || t.colors[i % t.colors.length],
            borderWidth: 0, barPercentage: opts.hist ? 1 : 0.85, categoryPercentage: opts.hist ? 0.96 : 0.8,
          };
        }),
      },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        plugins: {
          legend: { display: datasets.length > 1 || !!opts.legend, labels: { color: t.fg, boxWidth: 12 } },
          tooltip: opts.tooltip ? { callbacks: { label: opts.tooltip } } : {},
        },
        scales: {
          x: { grid: { display: false }, ticks: opts.hist ? { maxRotation: 0, autoSkip: true, autoSkipPadding: 8 } : { autoSkip: false, maxRotation: 40 },
               title: { display: !!opts.x, text: opts.x || "" } },
          y: { beginAtZero: true, grid: { color: t.grid }, title: { display: !!opts.y, text: opts.y || "" },
               ticks: opts.yTicks ? { callback: opts.yTicks } : { precision: 0 } },
        },
      },
    };
  }
  function drawCharts() {
    var t = theme();
    Chart.defaults.color = t.muted;
    Chart.defaults.borderColor = t.grid;
    Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
    specs.forEach(function (s) {
      if (s.chart) s.chart.destroy();
      s.chart = new Chart(s.canvas, s.make(t));
    });
  }

  // ---- overview -------------------------------------------------------------------------------

  function overview() {
    var box = document.getElementById("overview");
    var grid = el("div", { class: "stats" });
    var judgments = META.judgments || {};
    grid.appendChild(stat("input file", META.input || "—", true));
    grid.appendChild(stat("judges", META.judges.map(function (j) { return j.name + " (" + (j.model || "?") + ")"; }).join(", "), true));
    grid.appendChild(stat("rubrics", META.rubrics.map(function (r) { return r.name + " v" + r.version; }).join(", ") || "—", true));
    if (META.composites.length) {
      grid.appendChild(stat("composites", META.composites.map(function (c) { return c.name + " = " + (c.definition || "weights unknown"); }).join("; "), true));
    }
    grid.appendChild(stat("transcripts", fmtInt(META.transcripts)));
    grid.appendChild(stat("judgments", ["scored", "unscored", "failed"].map(function (k) { return fmtInt(judgments[k] || 0) + " " + k; }).join(" · "), true));
    grid.appendChild(stat("wall time", isNum(META.wall_time_s) ? META.wall_time_s.toFixed(1) + " s" : "—"));
    grid.appendChild(stat("total cost", fmtUsd(META.cost_usd)));
    grid.appendChild(stat("cache hit rate", isNum(META.cache_hit_rate) ? fmtPct(META.cache_hit_rate) + " (" + fmtInt(META.cache_hits) + ")" : "— (no judge calls)", false));
    grid.appendChild(stat("cache", (META.cache || "none") + (META.cache_mode ? " · " + META.cache_mode : ""), true));
    box.appendChild(grid);
    var foot = el("p", { class: "muted", text: "Generated " + META.generated_at + " by harness " + META.harness_version + " from " + META.run_dir + " · charts: Chart.js " + META.chart_js_version });
    box.appendChild(foot);
    if (META.notes.length) {
      var ul = el("ul", { class: "notes", id: "notes" });
      META.notes.forEach(function (n) { ul.appendChild(el("li", { text: n })); });
      box.appendChild(ul);
    }
  }

  // ---- scores ---------------------------------------------------------------------------------

  function scores() {
    var box = document.getElementById("score-cards");
    DATA.metrics.forEach(function (m) {
      var card = el("div", { class: "card metric", "data-metric": m.name });
      var what = m.kind === "composite"
        ? "composite = " + (m.definition || "weights unknown") + " · 0..1, higher is better"
        : m.labels
          ? "categorical rubric v" + m.version + " · labels " + m.labels.join(", ")
          : "rubric v" + m.version + " · scale " + m.scale.join("..") + (m.direction ? " · " + m.direction + " is better" : "");
      card.appendChild(el("h3", { text: m.name }));
      card.appendChild(el("div", { class: "muted", text: what }));
      var judges = Object.keys(m.hist.counts);
      addChart(card, function (t) {
        return barChart(t, m.hist.labels, judges.map(function (j) { return { label: j, data: m.hist.counts[j] }; }),
          { hist: !m.labels, x: m.name, y: "transcripts" });
      });
      var rows = judges.map(function (j) {
        var s = m.stats[j] || {};
        var ci = s.ci95 ? "[" + fmt(s.ci95[0], 3) + ", " + fmt(s.ci95[1], 3) + "]" : "—";
        // A categorical rubric has no numeric series in summary.json: n is its labelled judgments.
        var n = m.labels ? m.hist.counts[j].reduce(function (a, b) { return a + b; }, 0) : s.n;
        return [j, fmtInt(n), m.labels ? "—" : fmt(s.mean, 3), m.labels ? "—" : ci, fmtInt(s.unscored) + (reasons(s.unscored_reasons) ? " (" + reasons(s.unscored_reasons) + ")" : ""),
          fmtInt(s.failed) + (reasons(s.failed_reasons) ? " (" + reasons(s.failed_reasons) + ")" : ""), m.kind === "rubric" ? fmtInt(s.clamped) : "—"];
      });
      card.appendChild(table(["judge", "n", "mean", "95% CI", "unscored", "failed", "clamped"], rows, [0, 1, 1, 0, 0, 0, 1]));
      box.appendChild(card);
    });
    if (!DATA.metrics.length) box.appendChild(el("p", { class: "muted", text: "The run has no rubrics." }));
  }

  // ---- performance ----------------------------------------------------------------------------

  var FIELD_LABEL = { total_ms: "agent total latency", llm_ms: "agent LLM latency", tool_ms: "agent tool latency", api_ms: "agent API latency" };

  function latencyCard(parent, title, entry, colorIndex) {
    var card = el("div", { class: "card perf" });
    card.appendChild(el("h3", { text: title }));
    var s = entry.stats || {};
    card.appendChild(el("div", { class: "muted", text: "p50 " + fmtMs(s.p50) + " · p95 " + fmtMs(s.p95) + " · p99 " + fmtMs(s.p99) + (isNum(s.mean) ? " · mean " + fmtMs(s.mean) : "") + (isNum(s.n) ? " · n " + fmtInt(s.n) : "") }));
    if (entry.hist) {
      var h = entry.hist;
      addChart(card, function (t) {
        return barChart(t, h.labels, [{ label: title, data: h.counts, color: t.colors[colorIndex % t.colors.length] }],
          { hist: true, x: h.overflow ? "latency (last bar: above p99)" : "latency", y: "count" });
      }, 180);
    } else {
      card.appendChild(el("p", { class: "muted", text: "No values." }));
    }
    parent.appendChild(card);
  }

  function performanceSection() {
    var box = document.getElementById("perf-cards");
    var P = DATA.performance;
    Object.keys(P.agent).forEach(function (f, i) { latencyCard(box, FIELD_LABEL[f] || f, P.agent[f], i); });
    var tc = P.tool_calls;
    var card = el("div", { class: "card perf" });
    card.appendChild(el("h3", { text: "tool calls per transcript" }));
    var s = tc.stats || {};
    card.appendChild(el("div", { class: "muted", text: "mean " + fmt(s.mean, 3) + " · p50 " + fmt(s.p50) + " · p95 " + fmt(s.p95) + " · p99 " + fmt(s.p99) + " · max " + fmt(s.max) }));
    if (tc.hist) {
      addChart(card, function (t) {
        return barChart(t, tc.hist.labels, [{ label: "transcripts", data: tc.hist.counts, color: t.colors[4] }], { x: "tool calls", y: "transcripts" });
      }, 180);
    } else card.appendChild(el("p", { class: "muted", text: "No tool-call counts in the transcripts." }));
    box.appendChild(card);
    Object.keys(P.judges).forEach(function (j, i) {
      var entry = P.judges[j];
      if (!entry.hist) {
        var c = el("div", { class: "card perf" }, el("h3", { text: "judge " + j + " latency" }),
          el("p", { class: "muted", text: "No live calls: every judgment came from the cache or needed no call." }));
        box.appendChild(c);
        return;
      }
      latencyCard(box, "judge " + j + " latency", entry, 5 + i);
    });
    var rows = Object.keys(P.agent).map(function (f) {
      var s = P.agent[f].stats || {};
      return [FIELD_LABEL[f] || f, fmtInt(s.n), fmtMs(s.p50), fmtMs(s.p95), fmtMs(s.p99), fmtMs(s.max)];
    });
    Object.keys(P.judges).forEach(function (j) {
      var s = P.judges[j].stats || {};
      rows.push(["judge " + j, "", fmtMs(s.p50), fmtMs(s.p95), fmtMs(s.p99), ""]);
    });
    var all = el("div", { class: "card wide" }, el("h3", { text: "percentiles" }), table(["latency", "n", "p50", "p95", "p99", "max"], rows, [0, 1, 1, 1, 1, 1]));
    box.appendChild(all);
  }

  // ---- cost -----------------------------------------------------------------------------------

  function cost() {
    var box = document.getElementById("cost-cards");
    var C = DATA.cost.summary || {};
    var judges = META.judges.map(function (j) { return j.name; });
    var byJudge = C.by_judge || {};
    var card = el("div", { class: "card" }, el("h3", { text: "cost by judge" }),
      el("div", { class: "muted", text: "total " + fmtUsd((C.total || {}).total_usd) + " · saved by the cache " + fmtUsd((C.total || {}).saved_by_cache_usd) + (C.note ? " · " + C.note : "") }));
    addChart(card, function (t) {
      function series(key) { return judges.map(function (j) { return (byJudge[j] || {})[key]; }); }
      return barChart(t, judges, [
        { label: "paid", data: series("paid_usd"), color: t.colors[0] },
        { label: "billed retries (est.)", data: series("retried_billed_usd"), color: t.colors[1] },
        { label: "saved by cache", data: series("saved_by_cache_usd"), color: t.colors[2] },
      ], { y: "USD", yTicks: fmtUsd, legend: true,
           tooltip: function (ctx) { return ctx.dataset.label + ": " + fmtUsd(ctx.raw); } });
    });
    box.appendChild(card);
    var byRubric = C.by_rubric || {};
    var rubrics = Object.keys(byRubric);
    var card2 = el("div", { class: "card" }, el("h3", { text: "cost by rubric" }), el("div", { class: "muted", text: "paid plus billed retries, per judge" }));
    addChart(card2, function (t) {
      return barChart(t, rubrics, judges.map(function (j) {
        return { label: j, data: rubrics.map(function (r) { return ((byRubric[r] || {})[j] || {}).total_usd; }) };
      }), { y: "USD", legend: true, yTicks: fmtUsd,
            tooltip: function (ctx) { return ctx.dataset.label + ": " + fmtUsd(ctx.raw); } });
    });
    box.appendChild(card2);
    var J = DATA.cost.judges || {};
    var rows = judges.map(function (j) {
      var s = J[j] || {}; var c = byJudge[j] || {};
      return [j, fmtInt(s.requests), fmtInt(s.calls), fmtInt(s.cache_hits), fmtInt(s.prompt_tokens), fmtInt(s.completion_tokens),
        fmtUsd(c.paid_usd), fmtInt(c.billed_retries) + " · " + fmtUsd(c.retried_billed_usd), fmtUsd(c.total_usd), fmtUsd(c.saved_by_cache_usd)];
    });
    var rrows = [];
    rubrics.forEach(function (r) {
      judges.forEach(function (j) {
        var c = (byRubric[r] || {})[j] || {};
        rrows.push([r, j, fmtUsd(c.paid_usd), fmtInt(c.billed_retries) + " · " + fmtUsd(c.retried_billed_usd), fmtUsd(c.total_usd), fmtUsd(c.saved_by_cache_usd)]);
      });
    });
    box.appendChild(el("div", { class: "card wide" }, el("h3", { text: "tokens and cost" }),
      table(["judge", "requests", "calls", "cache hits", "prompt tokens", "completion tokens", "paid", "billed retries", "total", "saved by cache"], rows, [0, 1, 1, 1, 1, 1, 1, 1, 1, 1]),
      table(["rubric", "judge", "paid", "billed retries", "total", "saved by cache"], rrows, [0, 0, 1, 1, 1, 1])));
  }

  // ---- judge health ---------------------------------------------------------------------------

  function health() {
    var box = document.getElementById("health-cards");
    var H = DATA.health;
    if (!H.length) { box.appendChild(el("p", { class: "muted", text: "No judgments." })); return; }
    var labels = H.map(function (h) { return judgesMany() ? h.judge + " · " + h.rubric : h.rubric; });
    var card = el("div", { class: "card wide" }, el("h3", { text: "rates per judge and rubric" }));
    addChart(card, function (t) {
      function pct(key) { return H.map(function (h) { return isNum(h[key]) ? 100 * h[key] : null; }); }
      return barChart(t, labels, [
        { label: "parse failures %", data: pct("parse_failure_rate"), color: t.colors[3] },
        { label: "clamped %", data: pct("clamp_rate"), color: t.colors[6] },
        { label: "retried %", data: pct("retry_rate"), color: t.colors[1] },
      ], { y: "% of judgments", legend: true, yTicks: function (v) { return v + "%"; },
           tooltip: function (ctx) { return ctx.dataset.label + ": " + (isNum(ctx.raw) ? ctx.raw.toFixed(2) + "%" : "—"); } });
    }, 200);
    var rows = H.map(function (h) {
      return [h.judge, h.rubric, fmtInt(h.judgments),
        fmtInt(h.parse_failures) + " (" + fmtPct(h.parse_failure_rate) + ")" + (reasons(h.parse_reasons) ? " " + reasons(h.parse_reasons) : ""),
        fmtInt(h.clamped) + " (" + fmtPct(h.clamp_rate) + ")",
        fmtInt(h.retried) + " of " + fmtInt(h.live) + " (" + fmtPct(h.retry_rate) + ")",
        fmtInt(h.billed_retries), fmtInt(h.failed) + (reasons(h.error_kinds) ? " (" + reasons(h.error_kinds) + ")" : ""),
        reasons(h.other_unscored) || "—", fmtInt(h.cached)];
    });
    card.appendChild(table(["judge", "rubric", "judgments", "parse failures", "clamped", "retried (live calls)", "billed retries", "failed (error kinds)", "other unscored", "cached"], rows,
      [0, 0, 1, 0, 0, 0, 1, 0, 0, 1]));
    box.appendChild(card);
  }
  function judgesMany() { return META.judges.length > 1; }

  // ---- judge trust: noise, position bias, probe shifts ---------------------------------------------

  function trust() {
    var box = document.getElementById("trust-cards");
    var T = DATA.trust || { judge_noise: [], pairwise: [], probes: [] };
    function ci(c, pct) {
      if (!c) return "—";
      return "[" + (pct ? fmtPct(c[0]) : fmt(c[0], 3)) + ", " + (pct ? fmtPct(c[1]) : fmt(c[1], 3)) + "]";
    }
    function rate(s) { return s && isNum(s.rate) ? fmtPct(s.rate) + " " + ci(s.ci, true) : "—"; }
    if (!T.judge_noise.length && !T.pairwise.length && !T.probes.length) {
      box.appendChild(el("p", { class: "muted", text: "No repeated samples in this run (samples = k), and no pairwise.json or probe.json given (harness report --trust FILE)." }));
      return;
    }
    if (T.judge_noise.length) {
      box.appendChild(el("div", { class: "card wide" }, el("h3", { text: "judge noise (repeated samples)" }),
        table(["rubric", "judge", "transcripts", "samples", "noise share", "noise share of the mean", "mean spread (SD)", "noise variance", "transcript variance"],
          T.judge_noise.map(function (r) {
            return [r.rubric, r.judge, fmtInt(r.transcripts), fmtInt(r.samples), fmtPct(r.noise_share), fmtPct(r.noise_share_of_mean),
              fmt(r.mean_spread, 4), fmt(r.noise_variance, 5), fmt(r.transcript_variance, 5)];
          }), [0, 0, 1, 1, 1, 1, 1, 1, 1])));
    }
    if (T.pairwise.length) {
      box.appendChild(el("div", { class: "card wide" }, el("h3", { text: "pairwise: verdicts in both orders" }),
        table(["judge", "pairs", "B wins", "tie", "A wins", "position bias", "flips to 1st / 2nd shown", "source"],
          T.pairwise.map(function (r) {
            return [r.judge, fmtInt(r.judged_in_both_orders), rate(r.b_wins), rate(r.ties), rate(r.a_wins), rate(r.position_bias),
              fmtInt(r.position_bias.to_first_shown) + " / " + fmtInt(r.position_bias.to_second_shown), r.source];
          }), [0, 1, 1, 1, 1, 1, 1, 0])));
    }
    if (T.probes.length) {
      box.appendChild(el("div", { class: "card wide" }, el("h3", { text: "bias probes: score shift, perturbed − original" }),
        table(["probe", "rubric", "judge", "n", "shift", "95% CI", "% of scale", "changed", "moved"],
          T.probes.map(function (r) {
            return [r.probe, r.rubric, r.judge, fmtInt(r.n), isNum(r.shift) ? (r.shift >= 0 ? "+" : "") + fmt(r.shift, 4) : "—", ci(r.ci, false),
              fmtPct(r.shift_share_of_scale), fmtInt(r.changed), r.moved === null ? "—" : r.moved ? "YES" : "no"];
          }), [0, 0, 0, 1, 1, 1, 1, 1, 0])));
    }
  }

  // ---- human labels: judge-only vs corrected vs human-only (forest plot per rubric) ---------------

  function forestChart(t, rows) {
    var kinds = [["judge-only", "judge_only", 2], ["corrected", "corrected", 1], ["human-only", "human_only", 3]];
    return {
      type: "bar",
      data: {
        labels: rows.map(function (r) { return r.judge; }),
        datasets: kinds.map(function (k) {
          return {
            label: k[0], backgroundColor: t.colors[k[2] - 1], borderWidth: 0, barPercentage: 0.9, categoryPercentage: 0.8,
            data: rows.map(function (r) { var s = r[k[1]]; return s && s.ci ? [s.ci[0], s.ci[1]] : null; }),
            means: rows.map(function (r) { var s = r[k[1]]; return s ? s.mean : null; }),
          };
        }),
      },
      options: {
        indexAxis: "y", animation: false, responsive: true, maintainAspectRatio: false,
        plugins: {
          legend: { display: true, labels: { color: t.fg, boxWidth: 12 } },
          tooltip: { callbacks: { label: function (c) {
            var d = c.dataset, v = c.raw;
            return d.label + ": " + fmt(d.means[c.dataIndex], 4) + " [" + fmt(v[0], 4) + ", " + fmt(v[1], 4) + "]";
          } } },
        },
        scales: { x: { beginAtZero: false, grid: { color: t.grid }, title: { display: true, text: "mean (interval)" } }, y: { grid: { display: false } } },
      },
    };
  }

  function inference() {
    var box = document.getElementById("inference-cards");
    var I = DATA.inference;
    if (!I) {
      box.appendChild(el("p", { class: "muted", text: "No human labels: harness infer RUN_DIR --labels FILE writes inference.json, which this section shows." }));
      return;
    }
    var level = Math.round(100 * (1 - I.alpha)) + "%";
    var design = I.design ? I.design.strategy + " design (" + I.design.path + ")" : "no recorded design: labels are not a random sample, the intervals are not valid";
    box.appendChild(el("p", { class: "card wide", text: "Labels: " + I.labels.join(", ") + " · " + design + " · " + level + " intervals" }));
    I.metrics.forEach(function (m) {
      var card = el("div", { class: "card" }, el("h3", { text: m.name + " (" + m.label_kind + " labels" + (m.labels_from_rubrics ? ": the composite of its rubrics' labels" : "") + ")" }));
      var shown = m.judges.filter(function (r) { return !r.refused; });
      if (shown.length) addChart(card, function (t) { return forestChart(t, shown); }, 70 + 46 * shown.length);
      card.appendChild(table(["judge", "corrected", "λ", "n", "N", "effective labels", "valid"],
        m.judges.map(function (r) {
          if (r.refused) return [r.judge, "refused: " + r.refused, "", fmtInt(r.n), fmtInt(r.counts.N), "", ""];
          return [r.judge, fmt(r.corrected.mean, 4) + " [" + fmt(r.corrected.ci[0], 4) + ", " + fmt(r.corrected.ci[1], 4) + "]",
            fmt(r.lambda, 3), fmtInt(r.n), fmtInt(r.counts.N), fmtInt(r.effective_labels), r.valid ? "yes" : "NO"];
        }), [0, 1, 1, 1, 1, 1, 0]));
      var notes = [];
      m.judges.forEach(function (r) { r.notes.forEach(function (n) { notes.push(r.judge + ": " + n); }); });
      if (notes.length) {
        var list = el("ul", { class: "notes" });
        notes.forEach(function (n) { list.appendChild(el("li", { text: n })); });
        card.appendChild(list);
      }
      box.appendChild(card);
    });
  }

  // ---- the agent: its metrics and, per task, pass@k and pass^k ------------------------------------

  function injection() {
    var I = DATA.injection;
    if (!I) {
      document.getElementById("injection").hidden = true;
      document.getElementById("injection-link").hidden = true;
      return;
    }
    var box = document.getElementById("injection-cards");
    var card = el("div", { class: "card wide" }, el("h3", { text: I.flagged_transcripts + " transcript(s) flagged, " + I.findings + " finding(s); a flag: " + I.on_flag }));
    var kinds = Object.keys(I.by_kind);
    if (kinds.length) card.appendChild(table(["kind", "findings"], kinds.map(function (k) { return [k, fmtInt(I.by_kind[k])]; }), [false, true]));
    if (I.rows.length) {
      card.appendChild(table(["transcript", "field", "turn", "step", "offset", "kind", "excerpt"], I.rows.map(function (r) {
        return [r.transcript, r.field, r.turn == null ? "" : String(r.turn), r.step == null ? "" : String(r.step), String(r.offset), r.kind, r.excerpt || ""];
      }), [false, false, true, true, true, false, false]));
    }
    if (I.more) card.appendChild(el("p", { class: "agent-note", text: I.more + " more in " + I.file }));
    box.appendChild(card);
  }

  function agent() {
    var A = DATA.agent;
    if (!A) {
      document.getElementById("agent").hidden = true;
      document.getElementById("agent-link").hidden = true;
      return;
    }
    var box = document.getElementById("agent-cards");
    var card = el("div", { class: "card wide" }, el("h3", { text: "agent metrics" }));
    var names = Object.keys(A.metrics);
    card.appendChild(table(["metric", "direction", "mean", "95% CI", "n", "min", "max", "unscored"], names.map(function (k) {
      var m = A.metrics[k];
      return [k, m.direction, fmt(m.mean, 4), m.ci95 ? "[" + fmt(m.ci95[0], 4) + ", " + fmt(m.ci95[1], 4) + "]" : "—", fmtInt(m.n), fmt(m.min, 4), fmt(m.max, 4),
        fmtInt(m.unscored) + (reasons(m.unscored_reasons) ? " (" + reasons(m.unscored_reasons) + ")" : "")];
    }), [0, 0, 1, 1, 1, 1, 1, 0]));
    box.appendChild(card);
    var tasks = el("div", { class: "card wide", id: "agent-tasks" }, el("h3", { text: "tasks: pass@k and pass^k" }));
    if (!A.tasks) {
      tasks.appendChild(el("p", { class: "muted", text: A.task_note || "no tasks" }));
    } else {
      var P = A.tasks;
      tasks.appendChild(el("p", { class: "muted", text: "success: " + P.success.rule + " · " + P.tasks.length + " tasks · " + fmtInt(P.runs.without_task) + " transcripts without a task" }));
      var heads = ["task", "runs n", "successes c", "flakiness"];
      P.k.forEach(function (k) { heads.push("pass@" + k); });
      P.k.forEach(function (k) { heads.push("pass^" + k); });
      var rows = P.tasks.map(function (t) {
        var r = [t.task + (t.flaky ? " (flaky)" : ""), fmtInt(t.n), fmtInt(t.c), fmt(t.flakiness, 3)];
        P.k.forEach(function (k) { r.push(fmt(t.pass_at_k[String(k)], 3)); });
        P.k.forEach(function (k) { r.push(fmt(t.pass_hat_k[String(k)], 3)); });
        return r;
      });
      var mean = ["mean over tasks", "", "", ""];
      P.means.forEach(function (m) { mean.push(fmt(m.pass_at_k.value, 3)); });
      P.means.forEach(function (m) { mean.push(fmt(m.pass_hat_k.value, 3)); });
      rows.push(mean);
      tasks.appendChild(table(heads, rows, heads.map(function (_, i) { return i > 0 ? 1 : 0; })));
    }
    box.appendChild(tasks);
  }

  // ---- transcript table (virtualised) ---------------------------------------------------------

  var ROW_H = 30;
  var T = DATA.table;
  var COLS = T.columns;
  var ROWS = T.rows;
  var view = [];
  var sortCol = T.sort;
  var sortDir = COLS[sortCol].worst;
  var hay = null;
  var body = document.getElementById("table-body");
  var space = document.getElementById("table-space");
  var head = document.getElementById("table-head");
  var colIndex = {};
  COLS.forEach(function (c, i) { colIndex[c.key] = i; });

  function cellText(c, v) {
    if (v === null || v === undefined) return "—";
    if (c.type === "score") return fmt(v, 3);
    if (c.type === "ms" || c.type === "int") return fmtInt(v);
    return String(v);
  }
  function compare(a, b) {
    var x = ROWS[a][sortCol], y = ROWS[b][sortCol];
    var xn = x === null || x === undefined, yn = y === null || y === undefined;
    if (xn || yn) return xn && yn ? a - b : (xn ? 1 : -1); // missing values last, whichever way
    var r = typeof x === "string" ? x.localeCompare(y) : x - y;
    if (r === 0) return a - b;
    return sortDir === "asc" ? r : -r;
  }
  function passes(i, needle, status) {
    var row = ROWS[i];
    var u = row[colIndex.unscored], f = row[colIndex.failed];
    if (status === "issues" && !(u || f)) return false;
    if (status === "failed" && !f) return false;
    if (status === "unscored" && !u) return false;
    if (status === "clean" && (u || f)) return false;
    if (!needle) return true;
    if (!hay) {
      hay = T.queries.map(function (q, k) { return (ROWS[k][0] + "\n" + q).toLowerCase(); });
    }
    return hay[i].indexOf(needle) !== -1;
  }
  function refresh() {
    var needle = document.getElementById("filter").value.trim().toLowerCase();
    var status = document.getElementById("status-filter").value;
    view = [];
    for (var i = 0; i < ROWS.length; i++) if (passes(i, needle, status)) view.push(i);
    view.sort(compare);
    document.getElementById("row-count").textContent = fmtInt(view.length) + " of " + fmtInt(ROWS.length) + " transcripts";
    space.style.height = Math.max(view.length * ROW_H, 1) + "px";
    Array.prototype.forEach.call(head.children, function (h, i) {
      h.setAttribute("aria-sort", i === sortCol ? (sortDir === "asc" ? "ascending" : "descending") : "none");
    });
    draw(true);
  }
  var drawn = { first: -1, last: -1 };
  function draw(force) {
    var first = Math.max(0, Math.floor(body.scrollTop / ROW_H) - 8);
    var last = Math.min(view.length, first + Math.ceil(body.clientHeight / ROW_H) + 16);
    if (!force && first === drawn.first && last === drawn.last) return;
    drawn = { first: first, last: last };
    var frag = document.createDocumentFragment();
    for (var k = first; k < last; k++) {
      var i = view[k];
      var row = el("div", { class: "vrow", role: "row", tabindex: "0", "data-index": String(i) });
      row.style.top = (k * ROW_H) + "px";
      for (var c = 0; c < COLS.length; c++) {
        var v = ROWS[i][c];
        var cell = el("div", { role: "cell", class: COLS[c].type === "text" || COLS[c].type === "label" ? "" : "num", text: cellText(COLS[c], v) });
        if (c === 0) cell.title = String(v);
        else if (COLS[c].scale && isNum(v)) {
          // A bar as long as the score's goodness: 1 (full) is best, whichever way the rubric runs.
          var sc = COLS[c].scale, unit = (v - sc[0]) / (sc[1] - sc[0]);
          var good = Math.max(0, Math.min(1, COLS[c].worst === "desc" ? 1 - unit : unit));
          cell.style.backgroundImage = "linear-gradient(90deg, var(--bar) " + (100 * good).toFixed(1) + "%, transparent " + (100 * good).toFixed(1) + "%)";
        }
        row.appendChild(cell);
      }
      frag.appendChild(row);
    }
    space.replaceChildren(frag);
    if (!view.length) space.appendChild(el("div", { class: "vempty", text: "No transcript matches the filter." }));
  }
  function buildTable() {
    // Header and rows share one explicit grid and one width, so their columns line up.
    var widths = COLS.map(function (c, i) { return i === 0 ? 200 : Math.max(96, Math.min(280, 8 * c.label.length + 48)); });
    var total = widths.reduce(function (a, b) { return a + b; }, 0);
    var tableEl = document.getElementById("table");
    tableEl.style.setProperty("--cols", "minmax(" + widths[0] + "px, 1fr) " + widths.slice(1).map(function (w) { return w + "px"; }).join(" "));
    tableEl.style.setProperty("--table-width", total + "px");
    COLS.forEach(function (c, i) {
      var h = el("div", { role: "columnheader", class: c.type === "text" ? "" : "num", text: c.label, title: "sort by " + c.label });
      h.addEventListener("click", function () {
        if (sortCol === i) sortDir = sortDir === "asc" ? "desc" : "asc";
        else { sortCol = i; sortDir = c.worst; }
        refresh();
      });
      head.appendChild(h);
    });
    body.addEventListener("scroll", function () { draw(false); }, { passive: true });
    space.addEventListener("click", function (e) {
      var row = e.target.closest(".vrow");
      if (row) openDetail(Number(row.getAttribute("data-index")));
    });
    space.addEventListener("keydown", function (e) {
      var row = e.target.closest(".vrow");
      if (row && e.key === "Enter") openDetail(Number(row.getAttribute("data-index")));
    });
    var timer = null;
    document.getElementById("filter").addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(refresh, 120);
    });
    document.getElementById("status-filter").addEventListener("change", refresh);
    window.addEventListener("resize", function () { draw(true); });
    refresh();
  }

  // ---- one transcript ---------------------------------------------------------------------------

  var dialog = document.getElementById("detail");
  var D = DATA.details;
  var chunks = new Map(); // chunk number -> Promise of its details; the last few are kept
  function chunk(n) {
    if (chunks.has(n)) {
      var kept = chunks.get(n);
      chunks.delete(n);
      chunks.set(n, kept);
      return kept;
    }
    var text = document.getElementById("details-" + n).textContent;
    var bin = atob(text), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var inflated = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
    var loading = new Response(inflated).text().then(JSON.parse);
    chunks.set(n, loading);
    if (chunks.size > 8) chunks.delete(chunks.keys().next().value);
    return loading;
  }
  var opening = 0;
  function openDetail(i) {
    var token = ++opening;
    var at = D.where[i];
    document.getElementById("detail-title").textContent = "transcript " + ROWS[i][0];
    document.getElementById("detail-body").replaceChildren(el("p", { class: "muted", text: "loading…" }));
    if (!dialog.open) dialog.showModal();
    chunk(at[0]).then(function (list) {
      if (token === opening) showDetail(i, list[at[1]]);
    }, function (e) {
      if (token === opening) document.getElementById("detail-body").replaceChildren(el("p", { class: "bad", text: "This transcript's details could not be read: " + e }));
    });
  }
  function textBlock(parent, title, text, cls) {
    parent.appendChild(el("h3", { text: title }));
    parent.appendChild(el("pre", { class: "text " + (cls || ""), dir: "auto", text: text === null || text === undefined ? "(none)" : text }));
  }
  function stepLine(s) {
    var args = s.arguments === undefined ? "" : typeof s.arguments === "string" ? s.arguments : JSON.stringify(s.arguments);
    return s.name + "(" + args + ")" + (s.failed ? " ✗ " + (s.error || s.result || "failed") : s.result !== undefined ? " → " + s.result : "");
  }
  // a conversation as a chat: each turn's user text, the agent's steps and its answer, with that
  // turn's judgments (judged per turn) and the conversation's score per rubric by the run's rule
  function chatBlock(out, turns, scores, judgments) {
    var box = el("section", { class: "chat", id: "chat" });
    box.appendChild(el("h3", { text: "conversation (" + turns.length + " turns)" }));
    if (scores) {
      box.appendChild(el("p", { class: "muted chat-rule", dir: "auto", text: "judged per turn: turns " + scores.judged.join(", ") + "; each conversation score is " + (scores.rule || scores.aggregate) + " (" + scores.aggregate + ")" }));
      var rows = scores.pairs.map(function (s) {
        return [s.rubric + " · " + s.judge].concat(s.turns.map(function (v) { return fmt(v, 4); }),
          [s.conversation === null ? "— (" + (s.why || "unscored") + ")" : fmt(s.conversation, 4)]);
      });
      var t = table(["rubric · judge"].concat(scores.judged.map(function (n) { return "turn " + n; }), ["conversation (" + scores.aggregate + ")"]), rows);
      t.classList.add("chat-scores");
      box.appendChild(t);
    }
    var byTurn = {};
    judgments.forEach(function (j) { var n = j[JF.turn]; if (n !== null && n !== undefined) (byTurn[n] = byTurn[n] || []).push(j); });
    var list = el("ol", { class: "turns" });
    turns.forEach(function (t) {
      var item = el("li", { class: "turn", "data-turn": String(t.index) });
      var judged = !scores || scores.judged.indexOf(t.index) >= 0;
      item.appendChild(el("b", { text: "turn " + t.index + (judged ? "" : " (not judged)") }));
      item.appendChild(el("div", { class: "muted", text: "user" }));
      item.appendChild(el("pre", { class: "text msg-user", dir: "auto", text: t.user }));
      if (t.steps.length) {
        var steps = el("ol", { class: "steps" });
        t.steps.forEach(function (s) { steps.appendChild(el("li", { class: s.failed ? "bad" : "" }, el("code", { dir: "auto", text: stepLine(s) }))); });
        item.appendChild(steps);
      }
      item.appendChild(el("div", { class: "muted", text: "agent" }));
      item.appendChild(el("pre", { class: "text msg-agent", dir: "auto", text: t.answer === null ? "(no answer)" : t.answer }));
      (byTurn[t.index] || []).forEach(function (j) {
        var status = j[JF.status];
        item.appendChild(el("div", { class: "turn-judgment", dir: "auto", text: j[JF.rubric] + " · judge " + j[JF.judge] + ": " + status + " " +
          (status !== "scored" ? (j[JF.reason] || "") : isNum(j[JF.score]) ? fmt(j[JF.score], 6) : String(j[JF.label])) }));
      });
      list.appendChild(item);
    });
    box.appendChild(list);
    out.appendChild(box);
  }
  function showDetail(i, d) {
    var out = el("div");
    var p = d.perf || {};
    out.appendChild(el("div", { class: "muted", text: "latency total " + fmtMs(p.total_ms) + " · LLM " + fmtMs(p.llm_ms) + " · tool " + fmtMs(p.tool_ms) + " · API " + fmtMs(p.api_ms) + " · tool calls " + fmt(p.tool_calls) }));
    if (d.texts) {
      if (d.texts.turns) chatBlock(out, d.texts.turns, p.turns || null, d.j);
      textBlock(out, "query", d.texts.query, "query");
      textBlock(out, "response", d.texts.response, "response");
      if (d.texts.reference !== null) textBlock(out, "reference", d.texts.reference, "reference");
      var ctx = d.texts.contexts;
      out.appendChild(el("h3", { text: "contexts (" + (ctx ? ctx.length + d.texts.contexts_left_out : 0) + ")" }));
      if (!ctx || !ctx.length) out.appendChild(el("p", { class: "muted", text: "(none)" }));
      (ctx || []).forEach(function (c, k) { out.appendChild(el("pre", { class: "text context", text: "[" + (k + 1) + "] " + c })); });
      if (d.texts.contexts_left_out) out.appendChild(el("p", { class: "muted", text: d.texts.contexts_left_out + " more context(s) not shown" }));
      if (d.texts.steps) {
        // the agent's steps as a timeline: turn and parallel group, the call, its result or error
        out.appendChild(el("h3", { text: "steps (" + d.texts.steps.length + ")" }));
        var list = el("ol", { class: "steps" });
        d.texts.steps.forEach(function (s) {
          var args = s.arguments === undefined ? "" : typeof s.arguments === "string" ? s.arguments : JSON.stringify(s.arguments);
          var head = "turn " + (s.turn === undefined ? "—" : s.turn) + " · group " + (s.group === undefined ? "—" : s.group) + " · " + s.name + "(" + args + ")";
          if (s.start !== undefined && s.end !== undefined) head += " · " + fmtMs((s.end - s.start) * 1000);
          var item = el("li", { class: s.failed ? "bad" : "" }, el("code", { text: head }));
          if (s.failed) item.appendChild(el("div", { class: "bad", text: "✗ " + (s.error || s.result || "failed") }));
          else if (s.result !== undefined) item.appendChild(el("pre", { class: "text context", text: s.result }));
          list.appendChild(item);
        });
        out.appendChild(list);
      }
      if (p.agent) {
        out.appendChild(el("h3", { text: "agent metrics" }));
        var facts = el("div", { class: "muted" });
        Object.keys(p.agent).forEach(function (k, n) {
          var v = p.agent[k];
          if (n) facts.appendChild(document.createTextNode(" · "));
          var behind = (p.agent_steps || {})[k];
          facts.appendChild(el("span", null, k + " ", el("b", { text: v === null ? "— (" + (p.agent_unscored[k] || "unknown") + ")" : fmt(v, 4) }),
            behind && behind.length ? " (steps " + behind.map(function (s) { return "[" + s + "]"; }).join(", ") + ")" : ""));
        });
        out.appendChild(facts);
        // why a trajectory did not match: the reference calls expected and not made, the steps not expected
        Object.keys(p.agent_notes || {}).forEach(function (k) {
          out.appendChild(el("p", { class: "agent-note", text: k + ": " + p.agent_notes[k] }));
        });
      }
      var ref = d.texts.reference_calls;
      if (ref) {
        // the reference beside the calls made: each expected call with the step that matched it, or marked
        out.appendChild(el("h3", { text: "reference beside the calls made (matched in mode " + ref.mode + ": " + (ref.matched === null ? "—" : ref.matched ? "match" : "no match") + ")" }));
        if (ref.note) out.appendChild(el("p", { class: "warn", text: ref.note }));
        var rt = el("table", { class: "grid reference" });
        rt.appendChild(el("thead", null, el("tr", null, el("th", { text: "#" }), el("th", { text: "expected" }), el("th", { text: "made" }))));
        var rb = el("tbody");
        ref.rows.forEach(function (r) {
          rb.appendChild(el("tr", { class: r.step === null ? "missing" : "made" }, el("td", { text: String(r.position) }),
            el("td", null, el("code", { dir: "auto", text: r.call })),
            el("td", { class: r.step === null ? "bad" : "" , text: r.step === null ? "expected, not made" : "step [" + r.step + "]" })));
        });
        rt.appendChild(rb);
        out.appendChild(el("div", { class: "scroll" }, rt));
        if (ref.unexpected.length) out.appendChild(el("p", { class: "muted unexpected", text: "steps not expected: " + ref.unexpected.map(function (s) { return "[" + s + "]"; }).join(", ") }));
      }
    } else if (d.left_out) {
      out.appendChild(el("p", { class: "warn", text: "The transcript's text is left out of this page to keep it small (see the notes at the top); harness explain " + META.run_dir + " " + ROWS[i][0] + " prints it." }));
    } else {
      out.appendChild(el("p", { class: "warn", text: "The transcript's text is not available: see the notes at the top of the report." }));
    }
    if (d.c.length) {
      out.appendChild(el("h3", { text: "composites" }));
      d.c.forEach(function (c) {
        var box = el("div", { class: "formula" }, (judgesMany() ? "[" + c.judge + "] " : "") + c.text);
        c.steps.forEach(function (s) { box.appendChild(el("div", { class: "muted", text: "  where " + s })); });
        if (c.agrees === false) box.appendChild(el("div", { class: "bad", text: "results.jsonl holds " + fmt(c.recorded, 6) + ": the run used other weights" }));
        out.appendChild(box);
      });
    }
    out.appendChild(el("h3", { text: "judgments (" + d.j.length + ")" }));
    d.j.forEach(function (j) {
      var status = j[JF.status];
      var cls = status === "scored" ? "good" : status === "failed" ? "bad" : "warn";
      var card = el("div", { class: "judgment" });
      card.appendChild(el("div", null, el("b", { text: j[JF.rubric] + " v" + j[JF.rubric_version] + " · judge " + j[JF.judge] + (j[JF.turn] === null || j[JF.turn] === undefined ? "" : " · turn " + j[JF.turn]) + "  " }),
        el("span", { class: "badge " + cls, text: status }), " ",
        el("b", { text: status !== "scored" ? (j[JF.reason] || "") : isNum(j[JF.score]) ? "score " + fmt(j[JF.score], 6) : "label " + j[JF.label] })));
      var facts = el("div", { class: "facts" });
      function fact(k, v) { facts.appendChild(el("span", null, k + " ", el("b", { text: v }))); }
      if (j[JF.raw_score] !== null && j[JF.raw_score] !== j[JF.score]) fact("parsed", fmt(j[JF.raw_score], 6));
      if (j[JF.clamped]) fact("clamped", "yes");
      if (j[JF.samples]) fact("samples", fmtInt(j[JF.samples]) + ": " + (j[JF.sample_scores] || j[JF.sample_labels] || []).map(function (v) {
        return v === null ? "—" : isNum(v) ? fmt(v, 4) : String(v); }).join(", ") + " (spread " + fmt(j[JF.spread], 4) + ")");
      if (isNum(j[JF.score_mass])) fact("logprob mass on score tokens", fmtPct(j[JF.score_mass]));
      if (status !== "scored" && j[JF.reason]) fact("reason", j[JF.reason]);
      fact("attempts", fmtInt(j[JF.attempts]));
      if (j[JF.billed_retries]) fact("billed retries", fmtInt(j[JF.billed_retries]));
      fact("latency", fmtMs(j[JF.latency_ms]));
      fact("tokens", fmtInt(j[JF.prompt_tokens]) + " + " + fmtInt(j[JF.completion_tokens]));
      fact("cost", fmtUsd(j[JF.cost_usd]));
      fact("cached", j[JF.cached] ? "yes" : "no");
      fact("cache key", j[JF.cache_key] || "—");
      card.appendChild(facts);
      if (j[JF.error]) card.appendChild(el("div", { class: "bad", text: j[JF.error] }));
      var raw = j[JF.raw_output];
      card.appendChild(el("div", { class: "muted", text: raw === null ? "no judge reply" : "judge reply:" }));
      if (raw !== null) card.appendChild(el("pre", { class: "text reply", text: raw }));
      out.appendChild(card);
    });
    var holder = document.getElementById("detail-body");
    holder.replaceChildren(out);
    holder.scrollTop = 0;
  }
  document.getElementById("detail-close").addEventListener("click", function () { dialog.close(); });
  dialog.addEventListener("click", function (e) { if (e.target === dialog) dialog.close(); });

  // ---- go -------------------------------------------------------------------------------------

  overview();
  scores();
  performanceSection();
  agent();
  injection();
  cost();
  health();
  trust();
  inference();
  buildTable();
  drawCharts();
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", drawCharts);
  document.documentElement.setAttribute("data-ready-ms", String(Math.round(window.performance.now())));
  document.documentElement.setAttribute("data-ready", "1");
})();
