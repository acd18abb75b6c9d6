/* The fused kernels page (annotate/pages/traces/kernels_page.py): the code of a kernel shown closed is a script
   of its own (trace/kernels/<hash>.js, which sets window.anKernelCode[hash]); opening the kernel loads it and
   puts the code in place of the note that says so. Works from file:// (a script tag, not a fetch), no network.
   Without JavaScript the note stays: the code then is not on the page. */
(function () {
  "use strict";
  var store = window.anKernelCode = window.anKernelCode || {};

  function show(note) {
    var key = note.getAttribute("data-an-code");
    if (store[key] !== undefined) {
      var box = document.createElement("div");
      box.innerHTML = store[key];
      note.replaceWith.apply(note, Array.prototype.slice.call(box.childNodes));
      return;
    }
    if (note.hasAttribute("data-an-loading")) return;
    note.setAttribute("data-an-loading", "");
    var script = document.createElement("script");
    script.src = note.getAttribute("data-an-src");
    script.onload = function () { note.removeAttribute("data-an-loading"); if (store[key] !== undefined) show(note); };
    script.onerror = function () {
      note.removeAttribute("data-an-loading");
      note.textContent = "载入失败 · could not load " + script.src;
    };
    document.head.appendChild(script);
  }

  // `toggle` does not bubble: listen in the capture phase for every <details> of the page
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.open || !details.querySelector) return;
    var note = details.querySelector(":scope > .an-kernel-lazy");
    if (note) show(note);
  }, true);
})();
