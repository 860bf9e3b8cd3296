/* contextledger inspector: draws the embedded report data. Logged text only ever goes through textContent. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var T = D.texts;
  var CALLS = D.calls;
  var SVGNS = "http://www.w3.org/2000/svg";
  var CATS = ["system", "tools", "state", "summary", "history", "stub", "truncated", "injected"];
  var LABEL = {
    system: "system", tools: "tools", state: "pinned and session state", summary: "summaries",
    history: "verbatim history", stub: "stubs", truncated: "truncated", injected: "injected",
    free: "free", reserve: "reserve (output + margin)"
  };
  var COLOR = {
    system: "#0072b2", tools: "#3d3d3d", state: "#cc79a7", summary: "#009e73", history: "#56b4e9",
    stub: "#e69f00", truncated: "#f0e442", injected: "#d55e00", free: "#ffffff", reserve: "#d9d9d9"
  };
  var DARK = { system: 1, tools: 1, summary: 1, injected: 1 };
  var MARKERS = [
    ["compaction", "\u25C6", "#d55e00", "compaction planned"],
    ["summary_applied", "\u25CF", "#009e73", "summary applied"],
    ["prefix_break", "\u2715", "#3d3d3d", "prefix break"],
    ["cache_expired", "\u25B2", "#0072b2", "cache TTL expired"],
    ["failure", "!", "#e69f00", "call failed"]
  ];
  var EVENTS = {};
  D.events.forEach(function (e) { EVENTS[e[0]] = e; });
  var state = { sel: CALLS.length - 1, focus: 0, items: [] };

  // -- small helpers ---------------------------------------------------------------------------------
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
    return e;
  }
  function fmt(n) { return n === null || n === undefined ? "\u2013" : Number(n).toLocaleString("en-US"); }
  function pct(a, b) { return b ? (100 * a / b).toFixed(1) + "%" : "\u2013"; }
  function kilo(n) { return n >= 1000 ? (n / 1000).toFixed(n >= 10000 ? 0 : 1) + "k" : String(n); }
  function pos(first, last) { return !first ? "" : first === last ? "#" + first : "#" + first + "\u2013" + last; }
  function preview(text) {
    var s = text.length > 240 ? text.slice(0, 240) + "\u2026" : text;
    return s.replace(/\s+/g, " ");
  }
  function ranges(list) {
    var out = [], i = 0;
    while (i < list.length) {
      var j = i;
      while (j + 1 < list.length && list[j + 1] === list[j] + 1) j++;
      out.push(pos(list[i], list[j]));
      i = j + 1;
    }
    return out.join(", ");
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function link(text, onClick) {
    var a = el("a", "link", text);
    a.tabIndex = 0;
    a.setAttribute("role", "button");
    a.addEventListener("click", function (ev) { ev.preventDefault(); onClick(); });
    a.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { ev.preventDefault(); onClick(); } });
    return a;
  }
  function chip(category, label) {
    var c = el("span", "chip" + (DARK[category] ? " dark" : ""), label || category);
    c.style.background = COLOR[category] || "#eee";
    return c;
  }
  function runAt(call, position) {
    var runs = call.runs, lo = 0, hi = runs.length - 1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (runs[mid][1] < position) lo = mid + 1;
      else if (runs[mid][0] > position) hi = mid - 1;
      else return runs[mid];
    }
    return null;
  }

  // -- header ----------------------------------------------------------------------------------------
  function header() {
    var how = D.source === "recorded" ? "recorded model calls" : "calls computed under policy " + D.policy;
    document.getElementById("meta").textContent = "session " + D.session_id + " \u00b7 " + how + " \u00b7 " +
      CALLS.length + " calls \u00b7 " + D.events.length + " events \u00b7 " + D.provider + " prompt cache, TTL " +
      D.ttl_seconds + " s \u00b7 tokenizer " + D.tokenizer + " \u00b7 generated " + D.generated_at;
    document.getElementById("timeline-sub").textContent =
      "(one column per call; tokens and % of the window; dashed line: budget)";
    var legend = document.getElementById("legend");
    CATS.concat(["free", "reserve"]).forEach(function (c) {
      var s = el("span"), i = el("i");
      i.style.background = COLOR[c];
      s.appendChild(i);
      s.appendChild(document.createTextNode(LABEL[c]));
      legend.appendChild(s);
    });
    MARKERS.forEach(function (m) {
      var s = el("span"), g = el("b", null, m[1]);
      g.style.color = m[2];
      s.appendChild(g);
      s.appendChild(document.createTextNode(m[3]));
      legend.appendChild(s);
    });
  }

  // -- charts ----------------------------------------------------------------------------------------
  function stacks(call) {
    var out = CATS.map(function (c) { return [c, call.tiers[c] || 0]; });
    out.push(["free", Math.max(0, call.budget - call.tokens)]);
    out.push(["reserve", Math.max(0, call.window - Math.max(call.budget, call.tokens))]);
    return out;
  }

  function niceStep(n) {
    var raw = Math.max(1, n / 12), p = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10));
    var steps = [1, 2, 5, 10].map(function (m) { return m * p; });
    for (var i = 0; i < steps.length; i++) if (steps[i] >= raw) return steps[i];
    return steps[steps.length - 1];
  }

  function composition(box, calls, ymax, onPick) {
    var W = Math.max(320, box.clientWidth || 1200), H = 224, L = 50, R = 44, TOP = 56, B = 16;
    var pw = W - L - R, ph = H - TOP - B, n = Math.max(1, calls.length), cw = pw / n;
    var bw = cw > 4 ? cw * 0.82 : cw, off = (cw - bw) / 2;
    var svg = sv("svg", { viewBox: "0 0 " + W + " " + H, height: H, "class": "composition" });
    function y(t) { return TOP + ph * (1 - t / ymax); }
    var step = niceStep(n);
    for (var c = 0; c < n; c += step) {
      var tick = sv("text", { x: L + c * cw + cw / 2, y: H - 3, "text-anchor": "middle", "class": "axis" });
      tick.textContent = String(c + 1);
      svg.appendChild(tick);
    }
    [0, 0.25, 0.5, 0.75, 1].forEach(function (f) {
      var t = Math.round(ymax * f), yy = y(t);
      svg.appendChild(sv("line", { x1: L, x2: W - R, y1: yy, y2: yy, stroke: "#e3e5e8" }));
      var lt = sv("text", { x: L - 4, y: yy + 3, "text-anchor": "end", "class": "axis" });
      lt.textContent = kilo(t);
      svg.appendChild(lt);
      var rt = sv("text", { x: W - R + 4, y: yy + 3, "class": "axis" });
      rt.textContent = Math.round(f * 100) + "%";
      svg.appendChild(rt);
    });
    var d = {};
    CATS.concat(["free", "reserve"]).forEach(function (c) { d[c] = []; });
    var budget = [];
    calls.forEach(function (call, i) {
      var x = L + i * cw + off, base = 0;
      stacks(call).forEach(function (s) {
        if (s[1] > 0) {
          var y0 = y(base), y1 = y(base + s[1]);
          d[s[0]].push("M" + x.toFixed(2) + " " + y1.toFixed(2) + "h" + bw.toFixed(2) + "V" + y0.toFixed(2) +
            "h" + (-bw).toFixed(2) + "Z");
        }
        base += s[1];
      });
      budget.push((i ? "L" : "M") + (L + i * cw).toFixed(2) + " " + y(call.budget).toFixed(2) + "H" +
        (L + (i + 1) * cw).toFixed(2));
    });
    CATS.concat(["free", "reserve"]).forEach(function (c) {
      if (!d[c].length) return;
      var attrs = { d: d[c].join(""), fill: COLOR[c], "class": "bar-" + c };
      if (c === "free") { attrs.stroke = "#c4c8cd"; attrs["stroke-width"] = 0.5; }
      svg.appendChild(sv("path", attrs));
    });
    svg.appendChild(sv("path", { d: budget.join(""), fill: "none", stroke: "#1b1b1b", "stroke-dasharray": "5 3",
      "stroke-width": 1.3, "class": "budget-line" }));
    MARKERS.forEach(function (m, row) {
      calls.forEach(function (call, i) {
        if (!call[m[0]]) return;
        var t = sv("text", { x: L + i * cw + cw / 2, y: 10 + row * 10, "text-anchor": "middle", fill: m[2],
          "class": "marker marker-" + m[0] });
        t.textContent = m[1];
        svg.appendChild(t);
      });
    });
    var selRect = sv("rect", { x: L, y: 2, width: Math.max(cw, 2), height: H - 4, fill: "none",
      stroke: "#1b1b1b", "stroke-width": 1.5, "class": "selection" });
    svg.appendChild(selRect);
    attach(svg, box, calls, L, cw, onPick);
    clear(box);
    box.appendChild(svg);
    return function (i) { selRect.setAttribute("x", String(L + i * cw + (cw < 2 ? -1 : 0))); };
  }

  function cacheChart(box, calls, onPick) {
    var W = Math.max(320, box.clientWidth || 1200), H = 92, L = 50, R = 44, TOP = 16, B = 4;
    var pw = W - L - R, ph = H - TOP - B, n = Math.max(1, calls.length), cw = pw / n;
    var bw = cw > 4 ? cw * 0.82 : cw, off = (cw - bw) / 2;
    var tmax = 1, cmax = 1;
    calls.forEach(function (c) { tmax = Math.max(tmax, c.tokens); cmax = Math.max(cmax, c.cost); });
    var svg = sv("svg", { viewBox: "0 0 " + W + " " + H, height: H, "class": "cache" });
    function y(t) { return TOP + ph * (1 - t / tmax); }
    var parts = { read: [], written: [], input: [] }, cost = [];
    calls.forEach(function (c, i) {
      var x = L + i * cw + off, seg = [["read", c.cached], ["written", c.written],
        ["input", Math.max(0, c.tokens - c.cached - c.written)]], base = 0;
      seg.forEach(function (s) {
        if (s[1] > 0) parts[s[0]].push("M" + x.toFixed(2) + " " + y(base + s[1]).toFixed(2) + "h" + bw.toFixed(2) +
          "V" + y(base).toFixed(2) + "h" + (-bw).toFixed(2) + "Z");
        base += s[1];
      });
      cost.push((i ? "L" : "M") + (L + i * cw + cw / 2).toFixed(2) + " " + (TOP + ph * (1 - c.cost / cmax)).toFixed(2));
    });
    var fills = { read: "#0072b2", written: "#cc79a7", input: "#e69f00" };
    Object.keys(parts).forEach(function (k) {
      if (parts[k].length) svg.appendChild(sv("path", { d: parts[k].join(""), fill: fills[k], "class": "cache-" + k }));
    });
    svg.appendChild(sv("path", { d: cost.join(""), fill: "none", stroke: "#1b1b1b", "stroke-width": 1.4,
      "class": "cost-line" }));
    [["cached (read)", "#0072b2"], ["written", "#cc79a7"], ["uncached", "#e69f00"], ["\u2014 cost (right scale)", "#1b1b1b"]]
      .forEach(function (k, i) {
        var t = sv("text", { x: L + 6 + i * 92, y: 10, fill: k[1], "class": "key" });
        t.textContent = k[0];
        svg.appendChild(t);
      });
    var a = sv("text", { x: L - 4, y: TOP + 4, "text-anchor": "end", "class": "axis" });
    a.textContent = kilo(tmax) + " tok";
    svg.appendChild(a);
    var b = sv("text", { x: W - R + 4, y: TOP + 4, "class": "axis" });
    b.textContent = kilo(Math.round(cmax));
    svg.appendChild(b);
    var selRect = sv("rect", { x: L, y: 1, width: Math.max(cw, 2), height: H - 2, fill: "none", stroke: "#1b1b1b",
      "stroke-width": 1.5, "class": "selection" });
    svg.appendChild(selRect);
    attach(svg, box, calls, L, cw, onPick);
    clear(box);
    box.appendChild(svg);
    return function (i) { selRect.setAttribute("x", String(L + i * cw)); };
  }

  function attach(svg, box, calls, L, cw, onPick) {
    function index(ev) {
      var r = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal;
      var x = (ev.clientX - r.left) * vb.width / r.width;
      return Math.min(calls.length - 1, Math.max(0, Math.floor((x - L) / cw)));
    }
    svg.addEventListener("click", function (ev) { onPick(index(ev)); });
    svg.addEventListener("mousemove", function (ev) { hover(calls[index(ev)]); });
    svg.addEventListener("mouseleave", function () { hover(null); });
  }

  function hover(call) {
    var info = document.getElementById("timeline-info");
    if (!call) { info.textContent = ""; return; }
    var flags = MARKERS.filter(function (m) { return call[m[0]]; }).map(function (m) { return m[3]; });
    info.textContent = "call " + call.number + " at #" + call.position + ": " + fmt(call.tokens) + " of " +
      fmt(call.budget) + " tokens (" + pct(call.tokens, call.window) + " of the window) \u00b7 cached " +
      fmt(call.cached) + ", written " + fmt(call.written) + " \u00b7 cost " + fmt(call.cost) +
      (flags.length ? " \u00b7 " + flags.join(", ") : "");
  }

  // -- manifest (virtualized) ------------------------------------------------------------------------
  var ROW = 24;
  var list = document.getElementById("manifest");
  var spacer = el("div", "spacer");
  list.appendChild(spacer);

  function items(call) {
    var out = [], gone = call.runs.filter(function (r) {
      return r[2] === "dropped" || r[2] === "summarized";
    }), g = 0;
    call.blocks.forEach(function (b, i) {
      var ordered = i > 1 && b[0] !== "summary" && b[0] !== "state" && b[4] > 0;
      while (ordered && g < gone.length && gone[g][1] < b[4]) out.push({ gone: gone[g++] });
      out.push({ block: b, index: i });
    });
    while (g < gone.length) out.push({ gone: gone[g++] });
    return out;
  }

  function renderRow(item, i) {
    var row = el("div", "row" + (item.gone ? " gone" : "") + (i === state.focus ? " focus" : ""));
    row.setAttribute("role", "option");
    row.dataset.index = String(i);
    if (item.gone) {
      var r = item.gone;
      row.appendChild(el("span", "c-cache", ""));
      row.appendChild(el("span", "c-kind", r[2]));
      row.appendChild(el("span", "c-pos", pos(r[0], r[1])));
      row.appendChild(el("span", "c-rule", r[3]));
      row.appendChild(el("span", "c-tok", ""));
      row.appendChild(el("span", "c-text", r[2] === "summarized" ? "evicted: summarized in " + (r[4] || "a summary") +
        " (" + r[3] + ")" : "evicted: " + r[3] + " \u2014 open to read the original"));
    } else {
      var b = item.block;
      var cache = el("span", "c-cache badge " + b[8], b[8] || "\u2013");
      row.appendChild(cache);
      var k = el("span", "c-kind");
      k.appendChild(chip(b[0], b[0] === "history" ? b[1] : b[0]));
      row.appendChild(k);
      row.appendChild(el("span", "c-pos", pos(b[4], b[5])));
      row.appendChild(el("span", "c-rule", b[6] + (b[7] ? " \u00b7 " + b[7] : "")));
      row.appendChild(el("span", "c-tok", fmt(b[3])));
      row.appendChild(el("span", "c-text", preview(T[b[2]])));
    }
    row.style.top = i * ROW + "px";
    row.addEventListener("click", function () { setFocus(i); openItem(item); });
    return row;
  }

  function drawList() {
    var n = state.items.length;
    spacer.style.height = n * ROW + "px";
    var rows = spacer.querySelectorAll(".row");
    for (var r = 0; r < rows.length; r++) spacer.removeChild(rows[r]);
    var start = Math.max(0, Math.floor(list.scrollTop / ROW) - 8);
    var end = Math.min(n, start + Math.ceil((list.clientHeight || 330) / ROW) + 16);
    for (var i = start; i < end; i++) spacer.appendChild(renderRow(state.items[i], i));
  }
  list.addEventListener("scroll", function () { window.requestAnimationFrame(drawList); });

  function setFocus(i) {
    state.focus = Math.max(0, Math.min(state.items.length - 1, i));
    var top = state.focus * ROW;
    if (top < list.scrollTop) list.scrollTop = top;
    else if (top + ROW > list.scrollTop + list.clientHeight) list.scrollTop = top + ROW - list.clientHeight;
    drawList();
  }

  // -- text dialog -----------------------------------------------------------------------------------
  var dialog = document.getElementById("text-dialog");
  function showText(title, text, sources) {
    document.getElementById("text-title").textContent = title;
    document.getElementById("text-body").textContent = text;
    var links = document.getElementById("text-links");
    clear(links);
    (sources || []).slice(0, 40).forEach(function (p) {
      if (!EVENTS[p]) return;
      links.appendChild(link("original event #" + p + " (" + EVENTS[p][1] + ")", function () { showEvent(p); }));
      links.appendChild(document.createTextNode(" "));
    });
    if (!dialog.open) dialog.showModal();
  }
  function showEvent(p) {
    var e = EVENTS[p];
    showText("event #" + p + " \u00b7 " + e[1] + (e[2] ? " \u00b7 " + e[2] : "") + (e[4] ? " \u00b7 " + e[4] : ""),
      T[e[3]], []);
  }
  function openItem(item) {
    if (item.gone) {
      var r = item.gone, srcs = [];
      for (var p = r[0]; p <= r[1] && srcs.length < 40; p++) srcs.push(p);
      if (r[0] === r[1]) { showEvent(r[0]); return; }
      showText("evicted " + pos(r[0], r[1]) + " \u00b7 " + r[2] + " by " + r[3], "Pick an event above to read it.", srcs);
      return;
    }
    var b = item.block, sources = [];
    for (var q = b[4]; q && q <= b[5] && sources.length < 40; q++) sources.push(q);
    showText(b[0] + " block " + pos(b[4], b[5]) + " \u00b7 " + fmt(b[3]) + " tokens \u00b7 " + b[6] +
      (b[8] ? " \u00b7 cache " + b[8] : ""), T[b[2]], sources);
  }
  document.getElementById("text-close").addEventListener("click", function () { dialog.close(); });

  // -- call facts and diff ---------------------------------------------------------------------------
  function callFacts(call) {
    document.getElementById("call-title").textContent = call.number + " of " + CALLS.length + " \u00b7 position #" +
      call.position;
    var flags = MARKERS.filter(function (m) { return call[m[0]]; }).map(function (m) { return m[3]; });
    var u = call.usage;
    document.getElementById("call-facts").textContent = (call.at ? call.at + " \u00b7 " : "") + "policy " +
      call.policy + " (" + call.policy_hash + ") \u00b7 " + fmt(call.tokens) + " / " + fmt(call.budget) +
      " tokens (" + pct(call.tokens, call.budget) + " of budget) \u00b7 cache: " + fmt(call.cached) + " read, " +
      fmt(call.written) + " written \u00b7 cost " + fmt(call.cost) + " (no cache: " + fmt(call.uncached_cost) + ")" +
      (call.summary_id ? " \u00b7 summary " + call.summary_id : "") + (flags.length ? " \u00b7 " + flags.join(", ") : "") +
      (u ? " \u00b7 reported: in " + fmt(u.input_tokens) + ", cached " + fmt(u.cached_tokens) + ", out " +
        fmt(u.output_tokens) : "") +
      (call.replay_matches === false ? " \u00b7 renders differently now than recorded" : "") +
      (call.failure ? " \u00b7 failed: " + call.failure + " (the model never completed it)" : "");
  }

  function blockLine(call, index) {
    var b = call.blocks[index];
    if (!b) return el("span", "empty", "(none)");
    var s = el("span");
    s.appendChild(chip(b[0], b[0] === "history" ? b[1] : b[0]));
    s.appendChild(document.createTextNode(" " + pos(b[4], b[5]) + " " + fmt(b[3]) + " tok \u00b7 " +
      preview(T[b[2]]).slice(0, 90)));
    return s;
  }

  function drawDiff(call) {
    var box = document.getElementById("diff");
    clear(box);
    var d = call.diff, prev = CALLS[call.number - 2];
    if (!d || !prev) { box.appendChild(el("p", "empty", "The first call has no previous call.")); return; }
    var dl = el("dl", "kv");
    function kv(k, v) { dl.appendChild(el("dt", null, k)); var dd = el("dd"); if (typeof v === "string") dd.textContent = v; else dd.appendChild(v); dl.appendChild(dd); }
    kv("common prefix", fmt(d.common_tokens) + " tokens (" + pct(d.common_tokens, call.tokens) + " of this call)");
    kv("first different block", d.first_different >= 0 ? blockLine(call, d.first_different) :
      el("span", null, "none: the same blocks as the previous call"));
    kv("tokens", fmt(prev.tokens) + " \u2192 " + fmt(call.tokens) + " (" + (call.tokens >= prev.tokens ? "+" : "") +
      fmt(call.tokens - prev.tokens) + ")");
    kv("cost", fmt(prev.cost) + " \u2192 " + fmt(call.cost) + " (" + (d.cost_delta >= 0 ? "+" : "") + fmt(d.cost_delta) + ")");
    kv("blocks added", String(d.added.length));
    kv("blocks removed", String(d.removed.length));
    [["newly stubbed", d.stubbed], ["newly summarized", d.summarized], ["newly dropped", d.dropped],
      ["newly truncated", d.truncated]].forEach(function (p) { if (p[1].length) kv(p[0], ranges(p[1])); });
    box.appendChild(dl);
    function listOf(title, idxs, c) {
      if (!idxs.length) return;
      box.appendChild(el("h3", null, title));
      var ul = el("ul");
      idxs.slice(0, 30).forEach(function (i) { var li = el("li"); li.appendChild(blockLine(c, i)); ul.appendChild(li); });
      if (idxs.length > 30) ul.appendChild(el("li", "empty", "\u2026 " + (idxs.length - 30) + " more"));
      box.appendChild(ul);
    }
    listOf("Added", d.added, call);
    listOf("Removed", d.removed, prev);
  }

  // -- "why not?" --------------------------------------------------------------------------------------
  var RANK = { verbatim: 0, pinned: 0, control: 1, truncated: 2, stubbed: 3, summarized: 4, dropped: 5 };
  function trace(query, isRegex) {
    var out = document.getElementById("why-result");
    clear(out);
    if (!query) return;
    var re;
    try {
      re = new RegExp(isRegex ? query : query.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i");
    } catch (err) {
      out.appendChild(el("p", "verdict fate-absent", "Not a regular expression: " + err.message));
      return;
    }
    var memo = {};
    function has(textId) { if (!(textId in memo)) memo[textId] = re.test(T[textId]); return memo[textId]; }
    function inBlock(b) { return has(b[2]) || (b[9] >= 0 && has(b[9])); }
    var hits = D.events.filter(function (e) { return has(e[3]); }).map(function (e) { return e[0]; });
    if (!hits.length) {
      // not logged: contextledger's own text (a summary it recorded, the session-state card) may hold it
      var sent = CALLS.filter(function (call) { return call.blocks.some(inBlock); });
      if (!sent.length) {
        out.appendChild(el("p", "verdict fate-absent", "Not in the log: the session never held it."));
        return;
      }
      var kinds = {}, ours = true;
      sent.forEach(function (call) {
        call.blocks.forEach(function (b) {
          if (!inBlock(b)) return;
          var card = b[0] === "state" && !b[4], mine = card || b[0] === "summary";
          ours = ours && mine;
          kinds[card ? "the session-state card" : b[0] === "summary" ? "a summary" :
            b[0] === "tools" ? "the session's tool definitions" : b[0] === "system" ? "the system prompt" :
            b[0] + " block"] = true;
        });
      });
      var says = el("p", "verdict", (ours ? "In no logged event: contextledger wrote it (" :
        "In no logged message: it is in (") + Object.keys(kinds).join(", ") + "), sent in " + sent.length +
        " call(s), first call " + sent[0].number + " (#" + sent[0].position + "): ");
      says.appendChild(link("show", function () { select(sent[0].number - 1); }));
      out.appendChild(says);
      return;
    }
    var entered = hits[0], firstLeft = null, groups = [];
    CALLS.forEach(function (call) {
      var fate, rule = "", present = call.blocks.some(inBlock);
      if (call.position < entered) { fate = "not yet logged"; }
      else {
        var best = null;
        hits.forEach(function (p) {
          if (p > call.position) return;
          var r = runAt(call, p);
          if (r && (!best || RANK[r[2]] < RANK[best[2]])) best = r;
        });
        fate = best ? best[2] : "absent";
        rule = best ? best[3] : "";
        if (!present && (fate === "verbatim" || fate === "pinned")) fate = "absent";
        if (fate === "truncated" || fate === "summarized") fate += present ? " (still present)" : " (text lost)";
        if (firstLeft === null && !present) firstLeft = { call: call, fate: fate, rule: rule };
      }
      var last = groups[groups.length - 1];
      if (last && last.fate === fate && last.rule === rule && last.hash === call.policy_hash) last.to = call;
      else groups.push({ from: call, to: call, fate: fate, rule: rule, hash: call.policy_hash });
    });
    var e = EVENTS[entered];
    var verdict = "Entered at #" + entered + " (" + e[1] + (e[2] ? ", " + e[2] : "") + "). ";
    verdict += !CALLS.length ? "The session has no model call to trace it through." : firstLeft ? "First absent from call " + firstLeft.call.number + " (#" + firstLeft.call.position + "): " +
      firstLeft.fate + (firstLeft.rule ? " by " + firstLeft.rule : "") + "." : "Present in every call since.";
    out.appendChild(el("p", "verdict", verdict));
    var p = el("p");
    p.appendChild(document.createTextNode("In the log at " + hits.length + " event(s): "));
    hits.slice(0, 12).forEach(function (h) { p.appendChild(link("#" + h, function () { showEvent(h); })); p.appendChild(document.createTextNode(" ")); });
    out.appendChild(p);
    var table = el("table", "why-table"), head = el("tr");
    ["calls", "positions", "fate", "rule", "policy hash"].forEach(function (h) { head.appendChild(el("th", null, h)); });
    table.appendChild(head);
    groups.forEach(function (g) {
      var tr = el("tr"), td = el("td");
      td.appendChild(link(g.from === g.to ? String(g.from.number) : g.from.number + "\u2013" + g.to.number,
        function () { select(g.from.number - 1); }));
      tr.appendChild(td);
      tr.appendChild(el("td", null, pos(g.from.position, g.to.position)));
      tr.appendChild(el("td", "fate-" + g.fate.split(" ")[0], g.fate));
      tr.appendChild(el("td", null, g.rule));
      tr.appendChild(el("td", null, g.hash));
      table.appendChild(tr);
    });
    out.appendChild(table);
  }
  document.getElementById("why-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    trace(document.getElementById("why-query").value, document.getElementById("why-regex").checked);
  });

  // -- summaries ---------------------------------------------------------------------------------------
  function summaries() {
    var box = document.getElementById("summaries");
    if (!D.summaries.length) { box.appendChild(el("p", "empty", "No summary artifact in this session.")); return; }
    D.summaries.forEach(function (s) {
      var card = el("div", "summary-card");
      card.id = "summary-" + s.summary_id.replace(/[^A-Za-z0-9_-]/g, "_");
      card.appendChild(el("h3", null, "Summary " + s.summary_id + " \u00b7 round " + s.round));
      var dl = el("dl", "kv");
      function kv(k, v) { if (v === null || v === undefined || v === "") return; dl.appendChild(el("dt", null, k)); var dd = el("dd"); if (typeof v === "string") dd.textContent = v; else dd.appendChild(v); dl.appendChild(dd); }
      kv("covers", pos(s.covers_from, s.covers_through) + (s.new_from !== s.covers_from ? " (new from #" + s.new_from + ")" : ""));
      kv("produced after", "#" + s.produced_at);
      kv("model", [s.model, s.summarizer].filter(Boolean).join(" \u00b7 "));
      kv("prompt hash", s.prompt_sha || "");
      kv("trigger", s.trigger || "");
      kv("tokens", s.tokens_before !== null ? fmt(s.tokens_before) + " \u2192 " + fmt(s.tokens_after) + " (summary " + fmt(s.tokens) + ")" : fmt(s.tokens));
      if (s.fidelity) {
        var f = s.fidelity;
        kv("fidelity", pct(f.overall, 1) + " overall \u00b7 paths " + pct(f.paths, 1) + " \u00b7 commands " +
          pct(f.commands, 1) + " \u00b7 identifiers " + pct(f.identifiers, 1) + " \u00b7 numbers " + pct(f.numbers, 1) +
          " of " + f.total + " facts" + (f.missing.length ? " \u00b7 missing: " + f.missing.slice(0, 12).join(", ") : ""));
      }
      kv("status", s.used_in.length ? (function () {
        var sp = el("span", null, s.status + ": calls ");
        sp.appendChild(link(s.used_in[0] + "\u2013" + s.used_in[1], function () { select(s.used_in[0] - 1); }));
        return sp;
      })() : s.status);
      kv("lineage", s.parent ? "integrates " + s.parent : "first round");
      card.appendChild(dl);
      card.appendChild(el("pre", null, T[s.text]));
      box.appendChild(card);
    });
  }

  // -- compare -----------------------------------------------------------------------------------------
  var compareMarks = [];
  function compare() {
    if (!D.compare) return;
    var panel = document.getElementById("compare-panel");
    panel.hidden = false;
    document.getElementById("compare-heading").textContent = "Policies side by side: " + D.policy + " vs " + D.compare_policy;
    var charts = document.getElementById("compare-charts");
    var ymax = 1;
    CALLS.concat(D.compare).forEach(function (c) { ymax = Math.max(ymax, c.window); });
    [[D.policy, CALLS], [D.compare_policy, D.compare]].forEach(function (p) {
      var wrap = el("div"), box = el("div", "chart");
      wrap.appendChild(el("h3", null, p[0]));
      wrap.appendChild(box);
      charts.appendChild(wrap);
      compareMarks.push(composition(box, p[1], ymax, select));
    });
    var byPos = {};
    D.compare.forEach(function (c) { byPos[c.position] = c; });
    function gone(c) { var n = 0; c.runs.forEach(function (r) { if (r[2] !== "verbatim" && r[2] !== "pinned" && r[2] !== "control") n += r[1] - r[0] + 1; }); return n; }
    var table = el("table", "compare-table"), head = el("tr"), diffs = 0, tA = 0, tB = 0, cA = 0, cB = 0;
    ["call", "position", "tokens " + D.policy, "tokens " + D.compare_policy, "cost " + D.policy,
      "cost " + D.compare_policy, "evicted positions", "flags"].forEach(function (h, i) {
      head.appendChild(el("th", i > 1 && i < 7 ? "num" : null, h));
    });
    table.appendChild(head);
    CALLS.forEach(function (a) {
      var b = byPos[a.position];
      if (!b) return;
      tA += a.tokens; tB += b.tokens; cA += a.cost; cB += b.cost;
      if (a.tokens === b.tokens && a.cost === b.cost && a.summary_id === b.summary_id) return;
      diffs++;
      var tr = el("tr"), td = el("td");
      td.appendChild(link(String(a.number), function () { select(a.number - 1); }));
      tr.appendChild(td);
      tr.appendChild(el("td", null, "#" + a.position));
      [fmt(a.tokens), fmt(b.tokens), fmt(a.cost), fmt(b.cost), gone(a) + " vs " + gone(b)].forEach(function (v) {
        tr.appendChild(el("td", "num", v));
      });
      var fl = [];
      if (a.prefix_break !== b.prefix_break) fl.push("prefix break: " + (a.prefix_break ? D.policy : D.compare_policy));
      if (a.summary_id !== b.summary_id) fl.push("different summary");
      tr.appendChild(el("td", null, fl.join("; ")));
      table.appendChild(tr);
    });
    var wrapT = document.getElementById("compare-table");
    wrapT.appendChild(el("p", null, diffs + " of " + CALLS.length + " calls differ \u00b7 total tokens " + fmt(tA) +
      " vs " + fmt(tB) + " \u00b7 total cost " + fmt(Math.round(cA)) + " vs " + fmt(Math.round(cB))));
    wrapT.appendChild(table);
  }

  // -- selection, hash, keys ---------------------------------------------------------------------------
  var marks = [];
  function select(i, keepHash) {
    if (!CALLS.length) return;
    state.sel = Math.max(0, Math.min(CALLS.length - 1, i));
    var call = CALLS[state.sel];
    marks.concat(compareMarks).forEach(function (m) { m(state.sel); });
    callFacts(call);
    state.items = items(call);
    state.focus = Math.min(state.focus, Math.max(0, state.items.length - 1));
    drawList();
    drawDiff(call);
    hover(call);
    document.body.dataset.selected = String(call.number);
    if (!keepHash && window.history && window.history.replaceState) {
      window.history.replaceState(null, "", "#call=" + call.number);
    }
  }
  function fromHash() {
    var m = /call=(\d+)/.exec(window.location.hash);
    return m ? parseInt(m[1], 10) - 1 : null;
  }
  window.addEventListener("hashchange", function () { var i = fromHash(); if (i !== null) select(i, true); });
  document.addEventListener("keydown", function (ev) {
    var t = ev.target, typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA");
    if (dialog.open || typing || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    var k = ev.key, handled = true;
    if (k === "ArrowLeft" || k === "k") select(state.sel - 1);
    else if (k === "ArrowRight" || k === "j") select(state.sel + 1);
    else if (k === "Home") select(0);
    else if (k === "End") select(CALLS.length - 1);
    else if (k === "ArrowDown") setFocus(state.focus + 1);
    else if (k === "ArrowUp") setFocus(state.focus - 1);
    else if (k === "PageDown") setFocus(state.focus + 12);
    else if (k === "PageUp") setFocus(state.focus - 12);
    else if (k === "Enter" && state.items[state.focus]) openItem(state.items[state.focus]);
    else if (k === "/") document.getElementById("why-query").focus();
    else handled = false;
    if (handled) ev.preventDefault();
  });
  window.addEventListener("beforeprint", function () {
    var rows = spacer.querySelectorAll(".row");
    for (var r = 0; r < rows.length; r++) spacer.removeChild(rows[r]);
    state.items.slice(0, 3000).forEach(function (it, i) { spacer.appendChild(renderRow(it, i)); });
  });
  window.addEventListener("afterprint", drawList);

  header();
  if (!CALLS.length) {
    document.getElementById("timeline").appendChild(el("p", "empty", "This session has no model call to show."));
  } else {
    marks.push(composition(document.getElementById("timeline"), CALLS, Math.max.apply(null, CALLS.map(function (c) {
      return c.window;
    })), select));
    marks.push(cacheChart(document.getElementById("cache-chart"), CALLS, select));
  }
  summaries();
  compare();
  var start = fromHash();
  select(start === null ? CALLS.length - 1 : start, start === null);
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
})();
