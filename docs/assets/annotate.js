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
