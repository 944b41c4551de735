/* stormotel HTML report: draws the charts from the inlined JSON with uPlot (vendored). */
(function () {
  "use strict";
  var started = performance.now();
  var D = JSON.parse(document.getElementById("stormotel-data").textContent);
  var RANK_COLORS = ["#d62728", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                     "#17becf", "#bcbd22"];
  var EVENT_COLORS = {onset: "#000000", leader: "#d62728", follower: "#ff7f0e",
                      oom: "#7b0000", threshold: "#b8860b", first_rise: "#1f77b4"};
  var REGION_COLORS = {gap_critical: "rgba(214,39,40,0.13)", gap_warning: "rgba(255,127,14,0.13)",
                       gap_info: "rgba(31,119,180,0.10)",
                       collective_attribution: "rgba(148,103,189,0.10)",
                       no_data: "rgba(128,128,128,0.22)"};
  var SPAN_COLORS = {step: ["rgba(90,90,90,0.45)", "rgba(160,160,160,0.45)"],
                     collective: ["rgba(148,103,189,0.8)", "rgba(148,103,189,0.8)"]};

  function fmtMiB(v) {
    if (v == null) return "–";
    var a = Math.abs(v);
    if (a >= 1024 * 1024) return (v / 1048576).toFixed(2) + " TiB";
    if (a >= 1000) return (v / 1024).toFixed(2) + " GiB";
    return v.toFixed(1) + " MiB";
  }

  function fmtSeconds(s) {
    if (s >= 1) return (Math.round(s * 10) / 10) + " s";
    return Math.round(s * 1000) + " ms";
  }

  function overlay(u) {
    var ctx = u.ctx, b = u.bbox, dpr = uPlot.pxRatio;
    ctx.save();
    ctx.beginPath();
    ctx.rect(b.left, b.top, b.width, b.height);
    ctx.clip();
    var gapLabels = 0;
    D.regions.forEach(function (r) {
      var x0 = u.valToPos(r.t0, "x", true), x1 = u.valToPos(r.t1, "x", true);
      if (r.kind === "no_data") {
        // A silence: grey over the whole height, labelled, never bridged by a line.
        ctx.fillStyle = REGION_COLORS.no_data;
        ctx.fillRect(x0, b.top, Math.max(x1 - x0, 2 * dpr), b.height);
        if (gapLabels < 4 && x1 - x0 > 40 * dpr) {
          ctx.fillStyle = "#555";
          ctx.font = (10 * dpr) + "px sans-serif";
          ctx.fillText(r.rank == null ? "no data" : "no data: rank " + r.rank, x0 + 3 * dpr,
                       b.top + b.height - (14 + 11 * gapLabels) * dpr);
          gapLabels++;
        }
        return;
      }
      ctx.fillStyle = REGION_COLORS[r.kind] || "rgba(0,0,0,0.06)";
      // Short findings shade the plot; long ones (drift over the whole window) get a top strip
      // so they do not tint everything.
      if (x1 - x0 < 0.25 * b.width) ctx.fillRect(x0, b.top, Math.max(x1 - x0, 2 * dpr), b.height);
      else {
        ctx.fillStyle = (REGION_COLORS[r.kind] || "rgba(0,0,0,0.06)").replace(/[\d.]+\)$/, "0.8)");
        ctx.fillRect(x0, b.top, x1 - x0, 4 * dpr);
      }
    });
    var laneH = 5 * dpr;
    D.spans.forEach(function (s, i) {
      var x0 = u.valToPos(s.t0, "x", true), x1 = u.valToPos(s.t1, "x", true);
      var colors = SPAN_COLORS[s.kind] || SPAN_COLORS.step;
      ctx.fillStyle = colors[i % 2];
      var y = s.kind === "collective" ? b.top + b.height - 2 * laneH : b.top + b.height - laneH;
      ctx.fillRect(x0, y, Math.max(x1 - x0, dpr), laneH);
    });
    ctx.font = (10 * dpr) + "px sans-serif";
    var labelled = 0;
    D.events.forEach(function (e) {
      var x = u.valToPos(e.t, "x", true);
      if (x < b.left || x > b.left + b.width) return;
      ctx.strokeStyle = EVENT_COLORS[e.kind] || "#444";
      ctx.lineWidth = (e.kind === "leader" || e.kind === "oom" ? 2 : 1) * dpr;
      ctx.setLineDash(e.kind === "threshold" || e.kind === "first_rise" ? [4 * dpr, 3 * dpr] : []);
      ctx.beginPath();
      ctx.moveTo(x, b.top);
      ctx.lineTo(x, b.top + b.height);
      ctx.stroke();
      if ((e.kind === "leader" || e.kind === "onset" || e.kind === "oom") && labelled < 6) {
        ctx.fillStyle = EVENT_COLORS[e.kind];
        ctx.fillText(e.label, x + 3 * dpr, b.top + (11 + 11 * labelled) * dpr);
        labelled++;
      }
    });
    ctx.restore();
  }

  var host = document.getElementById("charts");
  var width = Math.max(600, host.clientWidth - 8);
  var sync = uPlot.sync("stormotel");
  var points = 0;
  D.charts.forEach(function (c) {
    var box = document.createElement("section");
    box.className = "chart";
    var h = document.createElement("h3");
    h.textContent = c.title + " — envelope of " + c.ranks_reporting + " rank(s)" +
      (D.resolution_seconds ? " — step lines at the data's resolution, " +
       fmtSeconds(D.resolution_seconds) : "");
    box.appendChild(h);
    host.appendChild(box);
    var series = [
      {label: "time"},
      {label: "min (all ranks)", stroke: "rgba(70,130,180,0.9)", width: 1, value: function (u, v) { return fmtMiB(v); }},
      {label: "median", stroke: "#1f4e79", width: 1.5, value: function (u, v) { return fmtMiB(v); }},
      {label: "max (all ranks)", stroke: "rgba(70,130,180,0.9)", width: 1, value: function (u, v) { return fmtMiB(v); }}
    ];
    var data = [D.x, c.lo, c.median, c.hi];
    c.lines.forEach(function (l, i) {
      series.push({label: "rank " + l.rank, stroke: RANK_COLORS[i % RANK_COLORS.length],
                   width: 1.25, value: function (u, v) { return fmtMiB(v); }});
      data.push(l.y);
    });
    // Sample-and-hold: a value holds until the next sample (a scrape is a reading at one
    // instant, not a ramp), so which rank rose first stays visible at 15 s scrapes.
    var stepped = uPlot.paths.stepped({align: 1});
    series.forEach(function (s, i) { s.points = {show: false}; if (i > 0) s.paths = stepped; });
    points += data.length * D.x.length;
    var opts = {
      width: width, height: 240, series: series,
      bands: [{series: [3, 1], fill: "rgba(70,130,180,0.18)"}],
      scales: {x: {time: true}},
      axes: [{}, {size: 80, values: function (u, vals) { return vals.map(fmtMiB); }}],
      cursor: {sync: {key: sync.key}},
      legend: {live: true},
      hooks: {draw: [overlay]}
    };
    new uPlot(opts, data, box);
  });
  var ms = performance.now() - started;
  window.stormotelReport = {renderMs: ms, doneAtMs: performance.now(), charts: D.charts.length,
                           points: points};
  var out = document.getElementById("render-time");
  if (out) out.textContent = "charts drawn in " + ms.toFixed(0) + " ms (" + points + " points)";
  document.body.setAttribute("data-rendered", "1");
})();
