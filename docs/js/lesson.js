/* Lesson self-assessment: radio choices saved in this browser's localStorage only.
   Nothing is sent anywhere. Works from file:// and without network; no modules, no fetch. */
(function () {
  "use strict";

  function storage() {
    try {
      var probe = "__annotate_probe__";
      window.localStorage.setItem(probe, "1");
      window.localStorage.removeItem(probe);
      return window.localStorage;
    } catch (e) {
      return null; // disabled, or a private mode that refuses writes
    }
  }

  // The stored choices, or null when what is stored is not what this script writes: a JSON object of
  // strings. A string, a number, an array, null or broken JSON (another script, an old version, a hand
  // edit) would otherwise swallow every later choice while the status still said "saved".
  function read(store, key) {
    var raw = store.getItem(key);
    if (raw === null) return {};
    var value;
    try { value = JSON.parse(raw); } catch (e) { return null; }
    if (!value || typeof value !== "object" || Array.isArray(value)) return null;
    var clean = {};
    for (var k in value) {
      if (!Object.prototype.hasOwnProperty.call(value, k)) continue;
      if (typeof value[k] !== "string") return null;
      clean[k] = value[k];
    }
    return clean;
  }

  // Writes the choices and reads them back: true only when the browser really kept them.
  function write(store, key, saved) {
    var text = JSON.stringify(saved);
    try { store.setItem(key, text); return store.getItem(key) === text; } catch (e) { return false; }
  }

  function setStatus(box, text) {
    var status = box.querySelector(".an-selfassess-status");
    if (status) status.textContent = text;
  }

  function restore(box, saved) {
    var sets = box.querySelectorAll("fieldset[data-key]");
    for (var i = 0; i < sets.length; i++) {
      var value = saved[sets[i].getAttribute("data-key")];
      var inputs = sets[i].querySelectorAll("input[type=radio]");
      for (var j = 0; j < inputs.length; j++) inputs[j].checked = value !== undefined && inputs[j].value === String(value);
    }
  }

  function setup(box) {
    if (box.getAttribute("data-ready")) return;
    box.setAttribute("data-ready", "1");
    var store = storage();
    var key = box.getAttribute("data-store") || "annotate.lesson.selfassess";
    if (!store) {
      setStatus(box, "此浏览器不允许本地存储，选择不会被保存。 · This browser refuses local storage; choices are not kept.");
      return;
    }
    var saved = read(store, key);
    if (saved === null) {
      try { store.removeItem(key); } catch (e) { /* nothing more to do */ }
      saved = {};
      setStatus(box, "本浏览器里保存的自评无法读取，已重置。 · The saved self-assessment was unreadable and has been reset.");
    } else if (Object.keys(saved).length) {
      setStatus(box, "已从本浏览器恢复。 · Restored from this browser.");
    }
    restore(box, saved);
    box.addEventListener("change", function (event) {
      var input = event.target;
      var set = input.closest && input.closest("fieldset[data-key]");
      if (!set || input.type !== "radio") return;
      saved[set.getAttribute("data-key")] = input.value;
      setStatus(box, write(store, key, saved) ? "已保存在本浏览器。 · Saved in this browser."
        : "未能保存：本浏览器拒绝写入。 · Not saved: this browser refused the write.");
    });
    var clear = box.querySelector(".an-selfassess-clear");
    if (clear) clear.addEventListener("click", function () {
      store.removeItem(key);
      saved = {};
      restore(box, saved);
      setStatus(box, "已清除。 · Cleared.");
    });
  }

  function init() {
    var boxes = document.querySelectorAll(".an-selfassess");
    for (var i = 0; i < boxes.length; i++) setup(boxes[i]);
  }

  if (window.document$ && typeof window.document$.subscribe === "function") {
    window.document$.subscribe(init); // Material's instant navigation, when enabled
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
