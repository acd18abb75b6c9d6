// Renders LaTeX with KaTeX for annotate's build: one JSON request per line on stdin
// ({"tex": "...", "display": false}), one JSON answer per line on stdout
// ({"html": "..."} or {"error": "KaTeX's message"}). A line may also hold an array of requests,
// answered by one line with the array of answers (one round trip for a whole page's formulas).
// Started once per build, so the cost of loading KaTeX is paid once, not once per formula.
"use strict";
const path = require("path");
const readline = require("readline");
const katex = require(path.resolve(process.argv[2], "katex.js"));

const lines = readline.createInterface({ input: process.stdin, terminal: false });
function render(request) {
  try {
    const html = katex.renderToString(request.tex, {
      displayMode: Boolean(request.display),
      throwOnError: true,
      strict: "ignore",
      output: "htmlAndMathml",
      trust: false,
    });
    return { html };
  } catch (err) {
    return { error: String(err && err.message ? err.message : err) };
  }
}

lines.on("line", (line) => {
  let answer;
  try {
    const request = JSON.parse(line);
    answer = Array.isArray(request) ? request.map(render) : render(request);
  } catch (err) {
    answer = { error: String(err && err.message ? err.message : err) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
