/* Element-level diagrams: click or focus a boxed number to highlight the elements its formula uses and
   show the arithmetic; counterexample buttons open and close their panels. The dependency sets and
   formulas come from the JSON the build wrote into each diagram (nothing is computed here).
   Works from file:// and without network; no modules, no fetch. */
(function () {
  "use strict";

  function readData(box) {
    var script = box.querySelector("script.dg-data");
    try { return JSON.parse(script ? script.textContent : "{}"); } catch (e) { return {}; }
  }

  function clear(box) {
    var on = box.querySelectorAll(".dg-on, .dg-sel");
    for (var i = 0; i < on.length; i++) on[i].classList.remove("dg-on", "dg-sel");
    var pressed = box.querySelectorAll("button.dg-cell[aria-pressed]");
    for (var j = 0; j < pressed.length; j++) pressed[j].removeAttribute("aria-pressed");
  }

  function select(box, data, cell) {
    var id = cell.getAttribute("data-cell");
    var entry = data.cells && data.cells[id];
    if (!entry) return;
    clear(box);
    cell.classList.add("dg-sel");
    cell.setAttribute("aria-pressed", "true");
    for (var i = 0; i < entry.deps.length; i++) {
      var dep = box.querySelector('.dg-cell[data-cell="' + entry.deps[i] + '"]');
      if (dep) dep.classList.add("dg-on");
    }
    var out = box.querySelector(".dg-formula");
    if (out) {
      out.textContent = "";
      var text = document.createElement("span");
      text.className = "dg-formula-text";
      text.textContent = entry.formula;
      out.appendChild(text);
      out.setAttribute("data-for", id);
      cite(out, data, entry);
      place(box, out, cell);
    }
  }

  // The selected cell's 引用 button: annotate.js copies the data-cite-text beside it. The parts come from
  // the build (annotate/pages/lesson/diagrams.py diagram_cell_citation joins the same ones), nothing is made up here.
  function cite(out, data, entry) {
    if (!data.cite || !entry.what) return;
    var text = [data.cite.head, entry.what, "算式 formula: " + entry.formula, data.cite.tail];
    out.setAttribute("data-cite-text", text.filter(function (p) { return p; }).join("\n"));
    var button = document.createElement("button");
    button.type = "button";
    button.className = "an-cite";
    button.setAttribute("data-cite", "text");
    button.title = data.cite.label;
    button.setAttribute("aria-label", data.cite.label);
    button.textContent = "引用 cite";
    out.appendChild(document.createTextNode(" "));
    out.appendChild(button);
  }

  // On a phone the blocks stack into a long column: the formula moves to just below the block that was
  // tapped, so the reader sees it where the tap happened; on a wide screen it stays below all blocks.
  var NARROW = "(max-width: 44.9375em)";
  function place(box, out, cell) {
    var blocks = box.querySelector(".dg-blocks");
    var block = cell.closest(".dg-block");
    var narrow = window.matchMedia && window.matchMedia(NARROW).matches;
    if (narrow && block) {
      if (block.nextSibling !== out) block.parentNode.insertBefore(out, block.nextSibling);
      var r = out.getBoundingClientRect();
      if (r.bottom > window.innerHeight && out.scrollIntoView) out.scrollIntoView({block: "nearest"});
    } else if (blocks && blocks.nextSibling !== out) {
      blocks.parentNode.insertBefore(out, blocks.nextSibling);
    }
  }

  function setupDiagram(box) {
    if (box.getAttribute("data-ready")) return;
    box.setAttribute("data-ready", "1");
    var data = readData(box);
    box.addEventListener("click", function (event) {
      var cell = event.target.closest && event.target.closest("button.dg-cell");
      if (cell && box.contains(cell)) select(box, data, cell);
    });
    box.addEventListener("focusin", function (event) {
      var cell = event.target.closest && event.target.closest("button.dg-cell");
      if (cell && box.contains(cell)) select(box, data, cell);
    });
    box.addEventListener("keydown", function (event) {
      if (event.key === "Escape") clear(box);
    });
  }

  function setupToggle(button) {
    if (button.getAttribute("data-ready")) return;
    button.setAttribute("data-ready", "1");
    button.addEventListener("click", function () {
      var panel = document.getElementById(button.getAttribute("aria-controls"));
      var open = button.getAttribute("aria-expanded") !== "true";
      button.setAttribute("aria-expanded", open ? "true" : "false");
      if (panel) panel.hidden = !open;
    });
  }

  function setup() {
    var boxes = document.querySelectorAll(".dg-diagram");
    for (var i = 0; i < boxes.length; i++) setupDiagram(boxes[i]);
    var toggles = document.querySelectorAll("button.dg-ce-toggle");
    for (var j = 0; j < toggles.length; j++) setupToggle(toggles[j]);
  }

  // Material's instant navigation swaps pages without a reload: document$ says when (absent from file://).
  if (window.document$ && typeof window.document$.subscribe === "function") window.document$.subscribe(setup);
  else if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
