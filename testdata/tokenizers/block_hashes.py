#!/usr/bin/env python3
"""Print SGLang block hashes of reference token ids, for the expectations of
testdata/script/explain_text.txtar and serve_tokenize.txtar.

The ids come from transformers.js (runtime/token/hf/testdata/goldens.json and
chat_goldens.json); the hash is SGLang's (python/sglang/srt/mem_cache/utils.py): per page of
block_size ids, SHA-256 over the previous page's digest then each id as a 4-byte
little-endian unsigned integer; the first 8 bytes of the digest read as a big-endian signed
integer. Written with hashlib, independently of the Go code under test.

Run from the repository root: python3 testdata/tokenizers/block_hashes.py
"""
import hashlib
import json
import struct


def block_hashes(ids, block_size=16):
    out, prev = [], b""
    for b in range(len(ids) // block_size):
        h = hashlib.sha256(prev)
        for i in ids[b * block_size:(b + 1) * block_size]:
            h.update(struct.pack("<I", i))
        prev = h.digest()
        out.append(struct.unpack(">q", prev[:8])[0])
    return out


def show(name, ids):
    print(f"{name}: {len(ids)} tokens, blocks of 16: {block_hashes(ids)}")


texts = json.load(open("runtime/token/hf/testdata/goldens.json"))
texts = texts if isinstance(texts, list) else texts["cases"]
chats = json.load(open("runtime/token/hf/testdata/chat_goldens.json"))
for c in texts:
    if c["name"] == "digits":
        show("text " + repr(c["text"]), c["ids"])
for c in chats:
    if c["name"] == "qwen3/system_user/sglang":
        show("chat " + c["name"], c["ids"])
        print("  messages:", c["messages"])
