/* Long tables folded by layer (annotate/pages/base/folds.py): the page's switch "只显示有差别的行 · only the rows
   that differ" appears and is on, so a fold shows the rows on which something differs; turning it off shows
   every row. An address that names a row (a values panel's compare link, #cmp-…) opens every fold around
   it and shows it even when it does not differ, then brings it to the middle of the screen.
   Without JavaScript the switch stays hidden and every row shows. Works from file://, no network. */
(function () {
  "use strict";

  function wire(box) {
    var label = box.querySelector(":scope > .an-fold-switch");
    if (!label) return;
    var input = label.querySelector("input");
    function apply() {
      if (input.checked) box.setAttribute("data-only-differ", "");
      else box.removeAttribute("data-only-differ");
    }
    input.addEventListener("change", apply);
    label.hidden = false;
    apply();
  }

  function reveal() {
    var id;
    try { id = decodeURIComponent(location.hash.slice(1)); } catch (e) { return; }
    var el = id ? document.getElementById(id) : null;
    if (!el || !el.closest(".an-folds")) return;
    for (var d = el.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
    if (el.hasAttribute("data-same")) el.setAttribute("data-shown", "");
    el.scrollIntoView({ block: "center" });
  }

  function start() {
    var boxes = document.querySelectorAll(".an-folds");
    for (var i = 0; i < boxes.length; i++) wire(boxes[i]);
    reveal();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
  window.addEventListener("hashchange", reveal);
})();
