// gen_pretokens.mjs writes pretokens.json: how Oniguruma, the regex engine of the Rust
// tokenizers crate, splits texts with the Qwen and Llama 3 Split patterns and the GPT-2
// ByteLevel pattern. The Go scanner
// must split identically. It covers the golden texts (goldens.json) plus strings built from
// the characters where JavaScript's regex engine, which made goldens.json, disagrees with
// Oniguruma (U+0085, U+FEFF, "'ſ").
//
// Re-run (Node 20, from the repository root):
//
//   mkdir -p /tmp/onig && (cd /tmp/onig && npm install vscode-oniguruma@2.0.1)
//   (cd /tmp/onig && node "$OLDPWD/runtime/token/hf/testdata/gen_pretokens.mjs") > runtime/token/hf/testdata/pretokens.json
//
// vscode-oniguruma is Oniguruma compiled to WebAssembly, run with its default syntax as
// tokenizers does (onig crate, Regex::new).

import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const require = createRequire(process.cwd() + "/");
const onig = require("vscode-oniguruma");
const wasm = readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm"));
await onig.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));

const patterns = {
  qwen: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  llama: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  gpt2: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
};
const scanners = Object.fromEntries(Object.entries(patterns).map(([k, p]) => [k, new onig.OnigScanner([p])]));

// split returns the matches and the gaps between them, as tokenizers' Split (Isolated)
// does; empty pieces are dropped.
function split(sc, text) {
  const s = new onig.OnigString(text);
  const out = [];
  let prev = 0;
  for (let pos = 0; pos <= text.length; ) {
    const m = sc.findNextMatchSync(s, pos);
    if (!m) break;
    const { start, end } = m.captureIndices[0];
    if (start > prev) out.push(text.slice(prev, start));
    if (end > start) out.push(text.slice(start, end));
    prev = end;
    pos = end > start ? end : end + 1;
  }
  if (prev < text.length) out.push(text.slice(prev));
  s.dispose();
  return out;
}

const here = new URL(".", import.meta.url);
const texts = JSON.parse(readFileSync(new URL("goldens.json", here), "utf8")).cases.map((c) => c.text);
texts.push("it'ſx 'ſ 'S ok", "a \u0085b\u0085\u0085 c\u0085", "a\ufeff b \ufeff\ufeffc", "x\u180e y\u200b z");

const alphabet = [
  "a", "Z", "ſ", "é", "中", "0", "٣", "½", " ", "  ", "\t", "\n", "\r\n", "\r", "\u000b", "\u000c",
  "\u0085", "\u00a0", "\u1680", "\u2000", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
  "\u180e", "\u200b", "\ufeff", "\u001c", "'", "'s", "'T", "'re", "'LL", ".", "!", "-", "😀",
];
let seed = 7;
const rand = (n) => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
};
for (let i = 0; i < 500; i++) {
  let s = "";
  for (let n = 1 + rand(30); n > 0; n--) s += alphabet[rand(alphabet.length)];
  texts.push(s);
}

const cases = texts.map((text) => ({
  text,
  qwen: split(scanners.qwen, text),
  llama: split(scanners.llama, text),
  gpt2: split(scanners.gpt2, text),
}));
process.stdout.write(JSON.stringify({ engine: "vscode-oniguruma@2.0.1", cases }).replace(/\},\{"text"/g, '},\n{"text"') + "\n");
