/* annotate: #L36 and #L28-L40 scroll to and highlight lines (also with parameters after them:
   #L156&layer=2&trace=cpu, read by the values panels below); a click on a line number sets the
   anchor (shift-click extends it to a range). Works from file:// (no fetch, no modules). */
/* Search index on first use (issue 24): Material's bundle appends search/search_index.js (the whole index,
   the one copy the build keeps: annotate/render/offline.py) as every page opens. That one script is held
   back until the reader first uses search (focus, click or keyboard shortcut of the search box); the
   bundle waits for its load event, so search then works as before, from file:// too. */
(function () {
  "use strict";
  var INDEX = /(^|\/)search\/search_index\.js$/;
  var append = Node.prototype.appendChild;
  var held = null, used = false;
  Node.prototype.appendChild = function (node) {
    if (!used && node && node.tagName === "SCRIPT" && INDEX.test(node.getAttribute("src") || "")) {
      held = [this, node];
      return node;
    }
    return append.call(this, node);
  };
  function release() {
    if (used) return;
    used = true;
    if (held) append.call(held[0], held[1]);
  }
  document.addEventListener("focusin", function (e) {
    if (e.target && e.target.matches && e.target.matches(".md-search__input")) release();
  });
  document.addEventListener("change", function (e) {
    if (e.target && e.target.getAttribute && e.target.getAttribute("data-md-toggle") === "search" && e.target.checked) release();
  }, true);
})();

(function () {
  "use strict";
  var RANGE = /^#L(\d+)(?:-L(\d+))?(?:&|$)/;

  function rows() { return document.querySelectorAll(".an-row[data-line]"); }

  function highlight() {
    var m = RANGE.exec(window.location.hash);
    var all = rows();
    for (var i = 0; i < all.length; i++) all[i].classList.remove("an-hl");
    if (!m || !all.length) return;
    var a = parseInt(m[1], 10), b = m[2] ? parseInt(m[2], 10) : a;
    if (b < a) {   // #L156-L150 means L150-L156: the address says so too, so the bar cites what is highlighted
      var t = a; a = b; b = t;
      history.replaceState(null, "", "#L" + a + "-L" + b + window.location.hash.slice(m[0].replace(/&$/, "").length));
    }
    var first = null;
    for (var j = 0; j < all.length; j++) {
      var n = parseInt(all[j].getAttribute("data-line"), 10);
      if (n >= a && n <= b) { all[j].classList.add("an-hl"); if (!first) first = all[j]; }
    }
    if (first) {
      // a range taller than the screen starts at the top; a short one is centred, so all of it shows
      var last = all[Math.min(all.length - 1, Array.prototype.indexOf.call(all, first) + (b - a))];
      var top = first.getBoundingClientRect().top, bottom = last.getBoundingClientRect().bottom;
      if (bottom - top > window.innerHeight * 0.7) first.scrollIntoView({ block: "start" });
      else window.scrollTo(0, window.pageYOffset + (top + bottom) / 2 - window.innerHeight / 2);   // the whole range
    }
    document.dispatchEvent(new CustomEvent("an-lines", { detail: { start: a, end: b } }));
  }

  function onClick(event) {
    var link = event.target.closest && event.target.closest("a.an-ln");
    if (!link) return;
    var line = link.parentElement.getAttribute("data-line");
    var m = RANGE.exec(window.location.hash);
    if (event.shiftKey && m) {
      event.preventDefault();
      var start = Math.min(parseInt(m[1], 10), parseInt(line, 10));
      var end = Math.max(parseInt(m[2] || m[1], 10), parseInt(line, 10));
      history.replaceState(null, "", "#L" + start + (end > start ? "-L" + end : ""));
      highlight();
    }
  }

  function flashNote() {
    var id = window.location.hash.slice(1);
    if (!/^note-\d+$/.test(id)) return;
    var title = document.getElementById(id), note = title && title.closest(".an-note");   // the id is on the card's title
    if (!note) return;
    note.classList.add("an-flash");
    setTimeout(function () { note.classList.remove("an-flash"); }, 1600);
  }

  /* a diagram wider than a phone: start scrolled so that both lanes (hidden_states, residual) show */
  function centreFlow() {
    var figs = document.querySelectorAll(".an-flow-figure");
    for (var i = 0; i < figs.length; i++) {
      var fig = figs[i], svg = fig.querySelector("svg");
      if (!svg || fig.scrollWidth <= fig.clientWidth) continue;
      var lanes = svg.querySelectorAll("line[x1]"), xs = [];
      for (var j = 0; j < lanes.length; j++) xs.push(parseFloat(lanes[j].getAttribute("x1")));
      if (!xs.length) continue;
      var view = svg.viewBox && svg.viewBox.baseVal && svg.viewBox.baseVal.width ? svg.viewBox.baseVal.width : fig.scrollWidth;
      var scale = svg.getBoundingClientRect().width / view;
      var mid = (Math.min.apply(null, xs) + Math.max.apply(null, xs)) / 2 * scale;
      fig.scrollLeft = Math.max(0, mid - fig.clientWidth / 2);
    }
  }

  function start() { highlight(); flashNote(); }
  window.addEventListener("hashchange", start);
  document.addEventListener("click", onClick);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { start(); centreFlow(); });
  else { start(); centreFlow(); }
})();

/* annotate: values panels, citations, keyboard. A panel's <summary> is its one tab stop (Enter /
   Space toggle it, Esc closes); a click on a traced line opens it too. The views of a trace in one
   layer are a generated script beside the page (qwen3.py.values-cpu.L2.js; HF's page: one script per
   trace, qwen3.py.values-cpu.js), added as a <script> element the first time a panel needs that
   (trace, layer): works from file://, and what a panel loads stays the same whatever the depth of the
   run (layer 27 of a 28-layer trace: that layer's script only). The layer switch lists the layers of
   the page's trace. The trace choice is page-wide (one switch in the banner) and remembered in localStorage;
   the layer choice switches every panel of the page; both go into the URL (#L156&layer=2&trace=cpu).
   One state: every change (trace, layer, a line number, the goto form, a panel opened) writes the whole
   address; on load the address wins over the remembered trace, which is then set to match. Every
   summary line shows the page's trace and layer (or no identity until that trace's data has loaded).
   A trace recorded on several tensor-parallel ranks adds a rank switch: its views of rank r > 0 are
   keyed "<layer>@<r>", and the choice is page-wide and in the URL too (&rank=1). */
(function () {
  "use strict";
  var STORE = "annotate.trace";
  var data = {}, state = { trace: null, layer: null, rank: null }, loading = {};

  function pageData() {
    var el = document.getElementById("an-page-data");
    try { return el ? JSON.parse(el.textContent) : {}; } catch (e) { return {}; }
  }
  function remembered() { try { return window.localStorage.getItem(STORE); } catch (e) { return null; } }
  function remember(v) { try { window.localStorage.setItem(STORE, v); } catch (e) { /* file:// may refuse */ } }
  function panels() { return document.querySelectorAll("details.an-values"); }
  function traceInfo(key) {
    var ts = (data.values && data.values.traces) || [];
    for (var i = 0; i < ts.length; i++) if (ts[i].key === key) return ts[i];
    return null;
  }
  /* a stray % in a hand-edited address must not stop the page: such a part is read as written */
  function decode(text) { try { return decodeURIComponent(text); } catch (e) { return text; } }
  /* the address: ref (L156 or L150-L156), line (a single line only), layer, trace, rank */
  function params() {
    var kv = {}, parts = window.location.hash.slice(1).split("&");
    var m = /^L(\d+)(?:-L(\d+))?$/.exec(parts[0] || "");
    for (var i = m ? 1 : 0; i < parts.length; i++) {
      var pair = parts[i].split("=");
      if (pair.length === 2) kv[decode(pair[0])] = decode(pair[1]);
    }
    return { ref: m ? parts[0] : null, line: m && (!m[2] || m[2] === m[1]) ? m[1] : null,
             layer: kv.layer || null, trace: kv.trace || null, rank: kv.rank || null };
  }
  /* the layer keys of a trace ("0" … "27"); the page's union when the trace does not say */
  function traceLayers(key) {
    var info = traceInfo(key), n = info && info.layers, out = [];
    if (typeof n !== "number") return ((data.values && data.values.layers) || []).map(String);
    for (var i = 0; i < n; i++) out.push(String(i));
    return out;
  }
  function traceTp(key) { var info = traceInfo(key); return (info && info.tp) || 1; }
  function layerKnown(key, trace) {
    return key === "none" || traceLayers(trace || traceNow()).indexOf(key) >= 0;
  }
  /* the page's layer: the chosen one, else the default of the first panel that has a layer switch */
  function pageLayer() {
    if (state.layer && layerKnown(state.layer)) return state.layer;
    var sel = document.querySelector("details.an-values .an-layer-select");
    return sel ? sel.closest("details.an-values").getAttribute("data-layer") : null;
  }
  /* the panel of the statement that holds `line`: its own, else the first panel after the line when
     that statement starts at or before it */
  function panelFor(line) {
    var panel = document.getElementById("values-L" + line), row = document.getElementById("L" + line);
    if (panel || !row) return panel;
    var all = panels();
    for (var i = 0; i < all.length; i++)
      if (all[i].compareDocumentPosition(row) & Node.DOCUMENT_POSITION_PRECEDING)
        return +all[i].getAttribute("data-line") <= +line ? all[i] : null;
    return null;
  }

  /* load the script of a trace's layer once (`layer`: a view key, "2" or "2@1"; `part`: "L" its views,
     "B" only their summary lines; a trace shipped as one script loads that script), then run `done` */
  function load(key, layer, done, part) {
    var info = traceInfo(key);
    if (!info) return;
    part = part || "L";
    var n = String(layer || "").split("@")[0], id = info.base ? key + "/" + part + n : key;
    var src = info.base ? info.base + "." + part + n + ".js" : info.src;
    var loaded = window.anValuesLoaded || {};
    if (info.base ? loaded[id] : (window.anValues || {})[key]) { done(); return; }
    (loading[id] = loading[id] || []).push(done);
    if (loading[id].length > 1) return;
    var s = document.createElement("script");
    s.src = src;
    s.onload = function () { var q = loading[id]; loading[id] = null; for (var i = 0; i < q.length; i++) q[i](); };
    s.onerror = function () {
      loading[id] = null;
      var all = panels();
      for (var i = 0; i < all.length; i++) if (all[i].open) slot(all[i]).innerHTML =
        '<p class="an-none">无法加载运行值 could not load the values (' + src + ")</p>";
    };
    document.head.appendChild(s);
  }
  /* the view area of a panel; on first use, the page's one copy of the legend and tools goes in */
  function slot(panel) {
    var v = panel.querySelector(".an-view"), t = document.getElementById("an-panel-template");
    if (!v && t) {
      panel.querySelector(".an-values-body").appendChild(t.content.cloneNode(true));
      v = panel.querySelector(".an-view");
    }
    return v;
  }

  /* the layer switch names only the shown layer in the page: add every layer of the page's trace, again
     whenever the trace changes (a 28-layer trace lists 28, a 4-layer one 4: one native <select>, which a
     phone shows as its own picker) */
  function fillLayers(panel) {
    var sel = panel.querySelector(".an-layer-select"), trace = traceNow();
    if (!sel || sel.getAttribute("data-filled") === trace) return;
    var keep = sel.value;
    var keys = traceLayers(trace).concat(sel.getAttribute("data-outside") ? ["none"] : []);
    sel.innerHTML = "";
    for (var i = 0; i < keys.length; i++) {
      var o = document.createElement("option");
      o.value = keys[i];
      o.textContent = keys[i] === "none" ? "层外 outside the layers" : "第 " + keys[i] + " 层 layer " + keys[i];
      sel.appendChild(o);
    }
    sel.value = keys.indexOf(keep) >= 0 ? keep : panel.getAttribute("data-layer");
    sel.setAttribute("data-filled", trace);
  }

  function layerFor(panel) {
    var sel = panel.querySelector(".an-layer-select");
    var want = state.layer, def = panel.getAttribute("data-layer");
    if (!sel) return def;
    fillLayers(panel);
    for (var i = 0; i < sel.options.length; i++) if (sel.options[i].value === want) return want;
    return def;
  }
  /* the rank switch comes empty (data-ranks="N"): under a tensor-parallel trace it shows that trace's
     ranks ("秩 rank 1 / 2"); under a one-rank trace it is hidden (there is no rank to choose) */
  function fillRanks(panel) {
    var sel = panel.querySelector(".an-rank-select");
    if (!sel) return;
    var n = traceTp(traceNow()), label = sel.closest("label") || sel;
    label.hidden = n < 2;
    if (+sel.getAttribute("data-filled") === n) return;
    sel.innerHTML = "";
    for (var i = 0; i < n; i++) {
      var o = document.createElement("option");
      o.value = String(i);
      o.textContent = "秩 rank " + i + " / " + n;
      sel.appendChild(o);
    }
    sel.setAttribute("data-filled", String(n));
  }
  function rankFor(panel) {
    var n = traceTp(traceNow()), want = state.rank === null ? NaN : +state.rank;
    if (!panel.querySelector(".an-rank-select") || n < 2) return "0";
    return want >= 0 && want < n ? String(want) : "0";
  }
  function traceNow() { return state.trace || (data.values && data.values.traces[0] && data.values.traces[0].key); }

  /* fill an open (or about to be shown) panel with the current trace and layer */
  function show(panel) {
    header(panel);
    fillLayers(panel);
    fillRanks(panel);
    var trace = traceNow(), layer = layerFor(panel), line = panel.getAttribute("data-line"), rank = rankFor(panel);
    slot(panel);
    var sel = panel.querySelector(".an-layer-select"), rsel = panel.querySelector(".an-rank-select");
    var tsel = panel.querySelector(".an-trace-select");
    if (sel) sel.value = layer;
    if (rsel) rsel.value = rank;
    if (tsel) tsel.value = trace;   // a copy of the banner's switch: it names the page's trace, not its first option
    var st = panel.querySelector(".an-values-state");
    if (st) st.textContent = stateText(panel);
    var key = rank === "0" ? layer : layer + "@" + rank;
    load(trace, key, function () {
      var views = (window.anValues[trace] || {})[line] || {}, view = views[key];
      if (trace !== traceNow() || key !== viewKey(panel)) return;   // the choice moved on meanwhile
      if (!view) { slot(panel).innerHTML = '<p class="an-none">这份运行没有记录这一行 this trace did not record this line</p>'; return; }
      slot(panel).innerHTML = view.h;
      if (panel.anOpened) { panel.anOpened = false; clearOfBar(panel); }   // just opened: its ≡ lines above the bar
      panel.querySelector(".an-brief").textContent = view.b;
      panel.setAttribute("data-brief", trace + "/" + key);
      panel.setAttribute("data-shown", trace + "/" + key);
    });
  }
  /* the header of an open panel names its layer and trace; the page's trace switch sits beside the
     layer switch (a copy of the banner's, kept in step by refresh), so it is never a page away */
  function header(panel) {
    var tag = panel.querySelector(".an-values-tag");
    if (tag && !panel.querySelector(".an-values-state")) {
      var st = document.createElement("span");
      st.className = "an-values-state";
      tag.parentNode.insertBefore(st, tag.nextSibling);
    }
    var banner = document.querySelector(".an-page-trace select");
    if (!banner || panel.querySelector(".an-trace-select")) return;
    var body = panel.querySelector(".an-values-body"), box = body.querySelector(".an-values-controls");
    if (!box) { box = document.createElement("div"); box.className = "an-values-controls"; body.insertBefore(box, body.firstChild); }
    var label = document.createElement("label"), sel = banner.cloneNode(true);
    sel.setAttribute("aria-label", "运行 trace（整页 whole page）");
    label.appendChild(document.createTextNode("运行 trace "));
    label.appendChild(sel);
    box.appendChild(label);
  }
  function viewKey(panel) { var rank = rankFor(panel), layer = layerFor(panel); return rank === "0" ? layer : layer + "@" + rank; }
  /* "第 2 层 layer 2 · 运行 trace CPU · float32": what a panel shows, in its header */
  function stateText(panel) {
    var layer = layerFor(panel), info = traceInfo(traceNow()) || {};
    var words = layer === "none" ? "层外 outside the layers" : "第 " + layer + " 层 layer " + layer;
    if (traceTp(traceNow()) > 1 && panel.querySelector(".an-rank-select")) words += " · 秩 rank " + rankFor(panel) + " / " + traceTp(traceNow());
    return words + " · 运行 trace " + (info.label || traceNow() || "");
  }
  /* a folded panel's summary line for the page's trace and layer: the one baked into the page when
     they are its own, else no identity ("加载中") until that trace's views have loaded */
  function summarise(panel) {
    var trace = traceNow(), want = trace + "/" + viewKey(panel), el = panel.querySelector(".an-brief");
    if (!el || panel.getAttribute("data-brief") === want) return;
    if (el.anBaked === undefined) el.anBaked = el.textContent;
    if (want === panel.getAttribute("data-trace") + "/" + panel.getAttribute("data-layer")) {
      el.textContent = el.anBaked; panel.setAttribute("data-brief", want); return;
    }
    el.textContent = "加载中… loading…";
    panel.setAttribute("data-brief", "loading");
    load(trace, viewKey(panel), function () {
      if (trace + "/" + viewKey(panel) !== want) return;   // the choice moved on meanwhile
      var line = panel.getAttribute("data-line");
      var view = (((window.anValues || {})[trace] || {})[line] || {})[viewKey(panel)] ||
                 (((window.anBriefs || {})[trace] || {})[line] || {})[viewKey(panel)];
      el.textContent = view ? view.b : "未记录 not recorded";
      panel.setAttribute("data-brief", want);
    }, "B");
  }
  function refresh() {
    var all = panels();
    for (var i = 0; i < all.length; i++) {
      if (all[i].open || all[i].hasAttribute("data-shown")) show(all[i]);
      else summarise(all[i]);
    }
    var ts = document.querySelectorAll(".an-trace-select");
    for (var j = 0; j < ts.length; j++) ts[j].value = traceNow();
  }

  /* the page's whole state into the address: #L<x>&layer=<n>&trace=<key> (&rank=r on a TP trace) */
  function writeUrl(ref) {
    if (!data.values || !data.values.traces.length) return;
    var parts = [], layer = pageLayer(), trace = traceNow();
    if (ref === undefined) ref = params().ref;
    if (ref) parts.push(ref);
    if (layer) parts.push("layer=" + encodeURIComponent(layer));
    if (trace) parts.push("trace=" + encodeURIComponent(trace));
    if (state.rank && state.rank !== "0") parts.push("rank=" + state.rank);   // rank 0 is the default: one-rank addresses stay as they were
    var hash = "#" + parts.join("&");
    if (hash !== window.location.hash) history.replaceState(null, "", hash);
  }
  /* a panel opened or changed: the address names its line (or keeps the line it holds) */
  function setUrl(panel) {
    var p = params();
    writeUrl(p.line && panelFor(p.line) === panel ? p.ref : "L" + panel.getAttribute("data-line"));
  }

  function onChange(event) {
    var el = event.target;
    if (!el.classList) return;
    if (el.classList.contains("an-trace-select")) {
      if (!traceInfo(el.value)) return;
      state.trace = el.value; remember(el.value);
      if (state.layer && !layerKnown(state.layer)) state.layer = null;   // layer 27 under a 4-layer trace: its default
      if (state.rank && +state.rank >= traceTp(state.trace)) state.rank = null;
    }
    else if (el.classList.contains("an-layer-select")) state.layer = el.value;
    else if (el.classList.contains("an-rank-select")) state.rank = el.value;
    else return;
    refresh();
    var panel = el.closest("details.an-values");
    if (panel) setUrl(panel);
    else { writeUrl(); openFromUrl(); }   // the banner's switch: the address, and so a reload, show the same
  }

  function syncExpanded(panel) {
    panel.querySelector("summary").setAttribute("aria-expanded", panel.open ? "true" : "false");
    var row = document.getElementById("L" + panel.getAttribute("data-line"));
    if (row) row.setAttribute("data-open", panel.open ? "true" : "false");
    if (panel.open) { panel.anOpened = true; show(panel); setUrl(panel); }
  }

  /* ---------- citations ---------- */
  function symbolAt(line) {
    var best = null, syms = data.symbols || [];
    for (var i = 0; i < syms.length; i++)
      if (syms[i].start <= line && line <= syms[i].end && (!best || syms[i].start >= best.start)) best = syms[i];
    return best ? best.name : "";
  }
  function permalink(a, b) {
    var up = data.upstream, ra = document.getElementById("L" + a), rb = document.getElementById("L" + b);
    if (!up || !ra || !rb || ra.classList.contains("an-local") || rb.classList.contains("an-local")) return null;
    // data-upstream is there only where the upstream line number differs from the local one
    var ua = ra.getAttribute("data-upstream") || String(a), ub = rb.getAttribute("data-upstream") || String(b);
    return up.file + "#L" + ua + (ub !== ua ? "-L" + ub : "");   // up.file: built by the build (lock.py file_url)
  }
  function codeOf(a, b) {
    var out = [];
    for (var n = a; n <= b; n++) {
      var c = document.querySelector("#L" + n + " .an-code");
      if (c) out.push(c.textContent.replace(/\u270e/g, "").replace(/\s+$/, ""));
    }
    return out.join("\n");
  }
  function citeLines(a, b) {
    var link = permalink(a, b), sym = symbolAt(a);
    return [data.cite || "第 20 课 · lesson 20",
            "位置 where: " + data.path + ":" + a + (b > a ? "-" + b : "") + (sym ? " · " + sym : ""),
            "上游 upstream: " + (link || "本地独有，无上游链接 local-only: no upstream permalink"),
            "代码 code:\n" + codeOf(a, b)];
  }
  function citation(button) {
    var kind = button.getAttribute("data-cite"), parts;
    if (kind === "note") {
      var card = button.closest(".an-note"), a = +card.getAttribute("data-start"), b = +card.getAttribute("data-end");
      var up = card.querySelector("a.an-upstream"), math = card.querySelector(".an-math");
      parts = [data.cite, "位置 where: " + data.path + ":" + a + (b > a ? "-" + b : "") + " · " + card.getAttribute("data-symbol"),
               "上游 upstream: " + (up ? up.href : "本地独有，无上游链接 local-only: no upstream permalink")];
      var tex = math && math.querySelector(".katex[aria-label]");
      if (tex) parts.push("公式 formula (TeX): " + tex.getAttribute("aria-label"));
    } else if (kind === "text") {   // a value cited in prose (lesson_values.py): its citation is built with the page
      parts = [button.closest("[data-cite-text]").getAttribute("data-cite-text")];
    } else if (kind === "range") {
      parts = citeLines(+button.getAttribute("data-start"), +button.getAttribute("data-end"));
    } else {
      var panel = button.closest("details.an-values"), line = +panel.getAttribute("data-line");
      parts = citeLines(line, line);
      if (kind === "var") parts.push(button.closest(".an-var").getAttribute("data-cite-text"));
      else parts.push("层 layer: " + layerFor(panel) + (traceTp(traceNow()) > 1 ? " · 秩 rank " + rankFor(panel) : "") +
        " · 运行 trace: " + ((traceInfo(traceNow()) || {}).label || traceNow()));
    }
    parts.push("我的推导 My derivation：");
    return parts.join("\n");
  }
  function copyText(text, button) {
    var done = function () {
      var old = button.getAttribute("data-label") || button.textContent;
      button.setAttribute("data-label", old);
      button.textContent = "已复制 Copied";
      setTimeout(function () { button.textContent = old; }, 1500);
    };
    var fallback = function () {
      var t = document.createElement("textarea");
      t.value = text; t.setAttribute("readonly", ""); t.style.position = "fixed"; t.style.opacity = "0";
      document.body.appendChild(t); t.select();
      try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
      document.body.removeChild(t); button.focus(); done();
    };
    if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).then(done, fallback);
    else fallback();
  }

  /* Ctrl-C on a selection with rendered math: the formulas' TeX, not KaTeX's three copies of it */
  function onCopy(event) {
    var sel = window.getSelection();
    if (!sel || !sel.rangeCount || !event.clipboardData) return;
    var range = sel.getRangeAt(0).cloneRange();
    var outer = function (node) { var el = node.nodeType === 1 ? node : node.parentElement; return el && el.closest(".katex"); };
    var ks = outer(range.startContainer), ke = outer(range.endContainer);
    if (ks) range.setStartBefore(ks);
    if (ke) range.setEndAfter(ke);
    var frag = range.cloneContents(), maths = frag.querySelectorAll(".katex");
    if (!maths.length) return;
    for (var i = 0; i < maths.length; i++) {
      var ann = maths[i].querySelector("annotation");
      var tex = maths[i].getAttribute("aria-label") || (ann ? ann.textContent : maths[i].textContent);
      var display = maths[i].parentElement && maths[i].parentElement.classList.contains("katex-display");
      maths[i].replaceWith(document.createTextNode(display ? "$$" + tex + "$$" : "$" + tex + "$"));
    }
    var box = document.createElement("div");
    box.appendChild(frag);
    event.clipboardData.setData("text/plain", box.textContent.trim());
    event.preventDefault();
  }

  /* the bar of the highlighted line(s): copy their citation (every line has one this way) */
  function lineBar(event) {
    var bar = document.getElementById("an-linebar");
    if (!document.querySelector(".an-source")) return;
    if (!bar) {
      bar = document.createElement("div");
      bar.id = "an-linebar"; bar.className = "an-linebar"; bar.setAttribute("role", "region");
      bar.setAttribute("aria-label", "选中的行 selected lines");
      bar.innerHTML = '<span class="an-linebar-where"></span> <button type="button" class="an-cite" data-cite="range">' +
        '复制引用 Copy citation</button> <button type="button" class="an-linebar-close" aria-label="关闭 close">×</button>';
      document.body.appendChild(bar);
    }
    var d = event.detail, btn = bar.querySelector(".an-cite"), where = bar.querySelector(".an-linebar-where");
    var last = document.querySelectorAll(".an-row[data-line]").length, end = Math.min(d.end, last);
    if (!document.getElementById("L" + d.start)) {   // #L99999: say so, and offer no citation of a line that is not there
      where.className = "an-linebar-where an-linebar-none";
      where.textContent = "没有 L" + d.start + " no such line（共 " + last + " 行 lines）";
      btn.hidden = true;
    } else {
      btn.setAttribute("data-start", d.start); btn.setAttribute("data-end", end);
      where.className = "an-linebar-where";
      where.textContent = "L" + d.start + (end > d.start ? "–" + end : "");
      btn.hidden = false;
    }
    bar.hidden = false;
    reserve();
  }
  /* the fixed bar must not sit on what the reader is reading: the page keeps its height free at the
     bottom (scrolling to the end and focus moves stop above it), and an opened panel is scrolled clear */
  function reserve() {
    var bar = document.getElementById("an-linebar");
    var h = bar && !bar.hidden ? Math.max(0, Math.ceil(window.innerHeight - bar.getBoundingClientRect().top) + 8) : 0;
    document.body.style.paddingBottom = h ? h + "px" : "";
    document.documentElement.style.scrollPaddingBottom = h ? h + "px" : "";
  }
  function clearOfBar(panel) {
    var bar = document.getElementById("an-linebar");
    if (!bar || bar.hidden) return;
    // the first value's ‖·‖ row (else its ≡ line) above the bar, as far as the line itself and the panel's
    // summary stay below the fixed header: a link to a line's values shows the line and its first numbers
    var head = panel.querySelector(".an-view .an-stats") || panel.querySelector(".an-view .an-var-head") || panel.querySelector("summary");
    var row = document.querySelector('.an-row[data-panel="' + panel.id + '"]'), hdr = document.querySelector(".md-header");
    var below = (hdr ? hdr.getBoundingClientRect().bottom : 0) + 4, s = panel.querySelector("summary").getBoundingClientRect();
    var keep = Math.min(s.top, row ? row.getBoundingClientRect().top : s.top) - below;
    var by = head.getBoundingClientRect().bottom + 4 - bar.getBoundingClientRect().top;
    if (by > 0) window.scrollBy(0, keep > 0 ? Math.min(by, keep) : 0);
  }

  function onClick(event) {
    var t = event.target;
    var btn = t.closest && t.closest("button.an-cite");
    if (btn) { event.preventDefault(); copyText(citation(btn), btn); return; }
    if (t.closest && t.closest(".an-linebar-close")) { document.getElementById("an-linebar").hidden = true; reserve(); return; }
    var row = t.closest && t.closest(".an-row.an-traced");
    if (!row || t.closest("a")) return;
    if (String(window.getSelection ? window.getSelection() : "")) return;   // selecting code, not opening
    var panel = document.getElementById(row.getAttribute("data-panel"));
    if (panel) {
      panel.open = !panel.open;
      if (panel.open) { panel.scrollIntoView({ block: "nearest" }); panel.querySelector("summary").focus({ preventScroll: true }); setUrl(panel); }
    }
  }

  function onKey(event) {
    if (event.key !== "Escape") return;
    // only the panel that holds the focus: Esc in the search box or the goto box is theirs, not a distant panel's
    var open = document.activeElement && document.activeElement.closest && document.activeElement.closest("details.an-values[open]");
    if (!open) return;
    open.open = false;
    open.querySelector("summary").focus({ preventScroll: true });
  }

  function onGoto(event) {
    var form = event.target;
    if (!form.classList || !form.classList.contains("an-goto")) return;
    event.preventDefault();
    var n = parseInt(form.elements.line.value, 10), row = document.getElementById("L" + n);
    if (!row) return;
    window.location.hash = "#L" + n;   // hashchange: fromUrl writes the rest of the state
    var next = row.parentElement.closest(".an-seg");
    var panel = next && next.nextElementSibling && next.nextElementSibling.matches("details.an-values") ? next.nextElementSibling : null;
    var target = panel && +panel.getAttribute("data-line") <= n ? panel.querySelector("summary") : row.querySelector(".an-ln");
    target.focus({ preventScroll: true });
  }

  /* an address with the state in it (#L156&layer=2&trace=cpu) opens the panel of its line; a bare
     #L156 only lands on the line */
  function openFromUrl() {
    var p = params(), panel = p.line && (p.layer || p.trace || p.rank) ? panelFor(p.line) : null;
    if (panel && !panel.open) { panel.open = true; show(panel); }
  }
  /* the address into the page: it wins over the remembered trace, which then follows it. On load a
     bare #L156 is left as it is; a later change of the address (a line number, a note's line link,
     the goto form) gets the whole state written into it, so the address always says what shows. */
  function fromUrl(event, fromMemory) {
    var p = params();
    if (p.trace && traceInfo(p.trace)) { state.trace = p.trace; remember(p.trace); }
    if (p.layer && layerKnown(p.layer)) state.layer = p.layer;
    if (p.rank && /^\d+$/.test(p.rank)) state.rank = p.rank;
    var open = p.layer || p.trace || p.rank;
    // a note's #note-3 stays as it is; a bare #L156 is completed when the page shows a remembered trace
    // (the address then says what shows, and a copied link shows the same), without opening the panel
    if ((event && p.ref) || (fromMemory && p.ref) || open) writeUrl();
    if (!open && fromMemory) { refresh(); return; }
    refresh();
    openFromUrl();
  }

  function wire() {
    data = pageData();
    var fromMemory = false;
    if (data.values && data.values.traces.length) {
      var saved = remembered();
      if (saved && traceInfo(saved)) { state.trace = saved; fromMemory = saved !== data.values.traces[0].key; }
    }
    var all = panels();
    for (var i = 0; i < all.length; i++) {
      var panel = all[i], row = document.getElementById("L" + panel.getAttribute("data-line"));
      panel.addEventListener("toggle", (function (p) { return function () { syncExpanded(p); }; })(panel));
      if (!row) continue;
      row.classList.add("an-traced");
      row.setAttribute("data-panel", panel.id);
      row.setAttribute("title", "查看运行值 show the values this line produced");
    }
    document.addEventListener("change", onChange);
    document.addEventListener("click", onClick);
    document.addEventListener("keydown", onKey);
    document.addEventListener("submit", onGoto);
    document.addEventListener("copy", onCopy);
    document.addEventListener("an-lines", lineBar);
    window.addEventListener("hashchange", fromUrl);
    document.addEventListener("an-lines", function () {   // a shift-click range comes bare: add the state
      var p = params();
      if (p.ref && !p.layer && !p.trace) writeUrl();
    });
    fromUrl(undefined, fromMemory);
    var m = /^#L(\d+)(?:-L(\d+))?/.exec(window.location.hash);   // the first highlight ran before we listened
    if (m) lineBar({ detail: { start: Math.min(+m[1], +(m[2] || m[1])), end: Math.max(+m[1], +(m[2] || m[1])) } });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
