/* Nothing hidden without a word: every box that scrolls sideways because its content (a formula, a
   code segment, a table, a diagram) is wider than the screen gets a visible "→ 可左右滑动 scroll" hint
   above it and a fade on the side where more content waits (data-an-more="right|left|both"); a wide
   table with one plain header row becomes a stack of cards on a phone (data-an-cards), each cell led by
   its column's name. Re-checked when the window resizes, a <details> opens, or a panel fills in.
   Works from file://, no modules, no network. tests/test_browser_layout.py measures the result. */
(function () {
  "use strict";

  var SCROLLERS = ".katex-display, .an-math, .an-seg, .an-table, .md-typeset__scrollwrap, .dg-scroll, " +
    ".an-figure, .an-exp-scroll, .an-symbols table, .highlight pre > code, .an-kernel-grid pre";
  var HINT = "an-more-hint";
  var PHONE = "(max-width: 44.9375em)";

  function overflows(el) { return el.scrollWidth > el.clientWidth + 1; }

  // which side hides more: "right" at the start, "both" in the middle, "left" at the end
  function side(el) {
    var left = el.scrollLeft > 1, right = el.scrollLeft + el.clientWidth < el.scrollWidth - 1;
    return left && right ? "both" : left ? "left" : "right";
  }

  // the hint sits just before the box, or before its <pre> when the box is a code block's <code> (inside
  // the <pre> it would read as code and sit under the copy button)
  function anchorOf(el) { return el.tagName === "CODE" && el.parentElement.tagName === "PRE" ? el.parentElement : el; }

  function hintOf(el) {
    var prev = anchorOf(el).previousElementSibling;
    return prev && prev.classList.contains(HINT) ? prev : null;
  }

  function mark(el) {
    var hint = hintOf(el);
    if (!overflows(el) || !el.getClientRects().length) {
      if (hint) hint.remove();
      el.removeAttribute("data-an-more");
      return;
    }
    el.setAttribute("data-an-more", side(el));
    if (!hint) {
      var anchor = anchorOf(el);
      hint = document.createElement(anchor.parentElement && anchor.parentElement.tagName === "P" ? "span" : "div");
      hint.className = HINT;
      hint.setAttribute("aria-hidden", "true");
      hint.textContent = "→ 可左右滑动 scroll";
      anchor.parentNode.insertBefore(hint, anchor);
    }
    if (!el.hasAttribute("data-an-more-wired")) {
      el.setAttribute("data-an-more-wired", "1");
      el.addEventListener("scroll", function () { if (el.hasAttribute("data-an-more")) el.setAttribute("data-an-more", side(el)); },
        { passive: true });
    }
  }

  // header names onto each cell, so that a phone can show the table as cards (CSS: [data-an-cards])
  function cards(table) {
    var head = table.tHead;
    if (!head || head.rows.length !== 1 || !table.tBodies.length) return false;
    var names = [];
    var cells = head.rows[0].cells;
    for (var i = 0; i < cells.length; i++) {
      if (cells[i].colSpan !== 1) return false;
      names.push(cells[i].textContent.replace(/\s+/g, " ").trim());
    }
    var rows = table.tBodies[0].rows;
    for (var r = 0; r < rows.length; r++) {
      if (rows[r].cells.length !== names.length) return false;
    }
    for (r = 0; r < rows.length; r++) {
      for (var c = 0; c < names.length; c++) rows[r].cells[c].setAttribute("data-an-label", names[c]);
    }
    table.setAttribute("data-an-cards", "");
    return true;
  }

  function wideTables() {
    if (!window.matchMedia(PHONE).matches) return;
    var tables = document.querySelectorAll(".md-typeset table:not([data-an-cards])");
    for (var i = 0; i < tables.length; i++) {
      var t = tables[i], box = t.parentElement;
      if (t.closest(".katex, .dg-diagram")) continue;                  // math and diagrams keep their grid
      if (box && (overflows(box) || t.scrollWidth > t.clientWidth + 1 || t.getBoundingClientRect().right > window.innerWidth)) cards(t);
    }
  }

  var queued = false;
  function scan() {
    queued = false;
    wideTables();
    var boxes = document.querySelectorAll(SCROLLERS);
    for (var i = 0; i < boxes.length; i++) mark(boxes[i]);
  }
  function later() {
    if (queued) return;
    queued = true;
    window.requestAnimationFrame(scan);
  }

  function start() {
    scan();
    window.addEventListener("resize", later);
    document.addEventListener("toggle", later, true);                  // <details> opened or closed
    var article = document.querySelector("article") || document.body;
    new MutationObserver(function (records) {
      for (var i = 0; i < records.length; i++) {
        var t = records[i].target;
        if (!(t.classList && t.classList.contains(HINT)) && records[i].addedNodes.length) { later(); return; }
      }
    }).observe(article, { childList: true, subtree: true });
    if (document.fonts && document.fonts.ready) document.fonts.ready.then(later);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
