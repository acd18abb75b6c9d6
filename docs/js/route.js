/* Route page (复习与实战路线): ticks saved in this browser's localStorage only, and the lesson's
   self-assessment (docs/js/lesson.js writes it) shown beside them. Nothing is sent anywhere. */
(function () {
  "use strict";
  function storage() {
    try {
      var probe = "annotate.route.probe";
      window.localStorage.setItem(probe, "1");
      window.localStorage.removeItem(probe);
      return window.localStorage;
    } catch (e) { return null; }   // file:// or private mode may refuse: the page still works, unsaved
  }
  function read(store, key) {
    var v;   // only a JSON object is what these scripts write; a string, number or array reads as nothing saved
    try { v = JSON.parse((store && store.getItem(key)) || "{}"); } catch (e) { return {}; }
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  }
  var WORDS = { "0": "还不行 not yet", "1": "大致可以 mostly", "2": "能讲给别人听 could teach it" };
  /* the lesson's self-assessment topics (docs/lesson.md, fieldset data-key), named as a reader knows them */
  var TOPICS = { flow: "两个变量的数据流 the two variables", fusion: "融合的 add_rms_forward the fused add",
                 rmsnorm: "手算 RMSNorm by hand", swiglu: "SwiGLU 的形状 SwiGLU's shapes" };
  /* "两个变量的数据流 the two variables：能讲给别人听 could teach it" for each known topic with a known answer;
     anything else in storage (another script's keys, objects, hand edits) is left out, never shown raw */
  function assessed(sa) {
    var out = [];
    for (var k in TOPICS) {
      var v = Object.prototype.hasOwnProperty.call(sa, k) ? sa[k] : null;   // lesson.js writes "0" / "1" / "2"
      if (typeof v === "string" && Object.prototype.hasOwnProperty.call(WORDS, v)) out.push(TOPICS[k] + "：" + WORDS[v]);
    }
    return out;
  }
  function init(box) {
    var store = storage();
    var key = box.getAttribute("data-store");
    var saved = read(store, key);
    var boxes = box.querySelectorAll("input[type=checkbox][data-step]");
    function count() {
      var done = 0;
      for (var i = 0; i < boxes.length; i++) { if (boxes[i].checked) { done++; } }
      box.querySelector(".an-route-done").textContent = String(done);
    }
    for (var i = 0; i < boxes.length; i++) {
      boxes[i].checked = !!saved[boxes[i].getAttribute("data-step")];
      boxes[i].addEventListener("change", function (ev) {
        saved[ev.target.getAttribute("data-step")] = ev.target.checked;
        if (store) { store.setItem(key, JSON.stringify(saved)); }
        count();
      });
    }
    count();
    var sa = read(store, box.getAttribute("data-selfassess"));
    var parts = assessed(sa);
    if (parts.length) { box.querySelector(".an-route-sa").textContent = parts.join(" · "); }
  }
  function start() {
    var boxes = document.querySelectorAll(".an-route");
    for (var i = 0; i < boxes.length; i++) { init(boxes[i]); }
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
