/* annotate: #L36 and #L28-L40 scroll to and highlight lines; a click on a line number sets the
   anchor (shift-click extends it to a range). Works from file:// (no fetch, no modules). */
(function () {
  "use strict";
  var RANGE = /^#L(\d+)(?:-L(\d+))?$/;

  function rows() { return document.querySelectorAll(".an-row[data-line]"); }

  function highlight() {
    var m = RANGE.exec(window.location.hash);
    var all = rows();
    for (var i = 0; i < all.length; i++) all[i].classList.remove("an-hl");
    if (!m || !all.length) return;
    var a = parseInt(m[1], 10), b = m[2] ? parseInt(m[2], 10) : a;
    if (b < a) { var t = a; a = b; b = t; }
    var first = null;
    for (var j = 0; j < all.length; j++) {
      var n = parseInt(all[j].getAttribute("data-line"), 10);
      if (n >= a && n <= b) { all[j].classList.add("an-hl"); if (!first) first = all[j]; }
    }
    if (first) first.scrollIntoView({ block: "center" });
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
    var note = document.getElementById(id);
    if (!note) return;
    note.classList.add("an-flash");
    setTimeout(function () { note.classList.remove("an-flash"); }, 1600);
  }

  function start() { highlight(); flashNote(); }
  window.addEventListener("hashchange", start);
  document.addEventListener("click", onClick);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

/* annotate: values panels (issue 5). A traced line is focusable; click / Enter / Space opens its
   panel. Changing the trace or the layer in one panel switches every panel of the page. Every view
   is in the page already (built from the trace): this only toggles `hidden`. */
(function () {
  "use strict";
  var state = { trace: null, layer: null };

  function panels() { return document.querySelectorAll("details.an-values"); }

  function show(panel) {
    var trace = state.trace || panel.getAttribute("data-trace");
    var layer = state.layer || panel.getAttribute("data-layer");
    var has = function (t, l) {
      return panel.querySelector('.an-view[data-trace="' + t + '"][data-layer="' + l + '"]') !== null;
    };
    if (!has(trace, panel.getAttribute("data-layer"))) trace = panel.getAttribute("data-trace");
    if (!has(trace, layer)) layer = panel.getAttribute("data-layer");
    var parts = panel.querySelectorAll(".an-view, .an-brief");
    for (var i = 0; i < parts.length; i++) {
      var on = parts[i].getAttribute("data-trace") === trace && parts[i].getAttribute("data-layer") === layer;
      if (on) parts[i].removeAttribute("hidden"); else parts[i].setAttribute("hidden", "");
    }
    var ts = panel.querySelector(".an-trace-select"), ls = panel.querySelector(".an-layer-select");
    if (ts) ts.value = trace;
    if (ls) ls.value = layer;
  }

  function onChange(event) {
    var el = event.target;
    if (!el.classList) return;
    if (el.classList.contains("an-trace-select")) state.trace = el.value;
    else if (el.classList.contains("an-layer-select")) state.layer = el.value;
    else return;
    var all = panels();
    for (var i = 0; i < all.length; i++) show(all[i]);
  }

  function toggle(panel) {
    panel.open = !panel.open;
    if (panel.open) panel.scrollIntoView({ block: "nearest" });
  }

  function wire() {
    var all = panels();
    for (var i = 0; i < all.length; i++) {
      var panel = all[i];
      var row = document.getElementById("L" + panel.getAttribute("data-line"));
      if (!row) continue;
      row.classList.add("an-traced");
      row.setAttribute("tabindex", "0");
      row.setAttribute("aria-controls", panel.id);
      row.setAttribute("title", "查看运行值 show the values this line produced (Enter)");
      (function (row, panel) {
        var sync = function () { row.setAttribute("aria-expanded", panel.open ? "true" : "false"); };
        sync();
        panel.addEventListener("toggle", sync);
        row.addEventListener("click", function (event) {
          if (event.target.closest("a")) return;
          if (String(window.getSelection ? window.getSelection() : "")) return;   // selecting code, not opening
          toggle(panel);
        });
        row.addEventListener("keydown", function (event) {
          if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggle(panel); }
        });
      })(row, panel);
    }
    document.addEventListener("change", onChange);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
