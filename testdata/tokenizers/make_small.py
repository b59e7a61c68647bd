#!/usr/bin/env python3
"""Write testdata/tokenizers/small/ from qwen3/: Qwen3's tokenizer cut to its first 1,000
merges, for the testscripts that need a real tokenizer file but not Qwen3's ids.

Loading the whole Qwen3 tokenizer (151,643 tokens, 151,387 merges) costs seconds per
`router` exec under -race; a script that execs the router five times paid it five times.
The small one keeps everything but the size: the same normalizer, pre-tokenizer,
post-processor, decoder and added tokens (with their ids), the 256 byte-level symbols, and
the first 1,000 merges with the tokens they join and make, each with its Qwen3 id. It is a
valid tokenizer.json for HuggingFace tokenizers and for the router's loader; its ids are
Qwen3's wherever it has the token, but it splits words Qwen3 merges further, so scripts
that check token ids or counts keep qwen3/.

tokenizer_config.json (the chat template, bos/eos) is copied unchanged.

Run from the repository root: python3 testdata/tokenizers/make_small.py
"""
import gzip
import json
import shutil

MERGES = 1000
SRC, DST = "testdata/tokenizers/qwen3", "testdata/tokenizers/small"


def byte_symbols():
    """The byte-level alphabet of GPT-2 (tokenizers' ByteLevel): one symbol per byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    symbols, n = {}, 0
    for b in range(256):
        if b in keep:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(256 + n)
            n += 1
    return symbols.values()


def main():
    with gzip.open(f"{SRC}/tokenizer.json.gz", "rt", encoding="utf-8") as f:
        full = json.load(f)
    model = full["model"]
    merges = model["merges"][:MERGES]
    keep = set(byte_symbols())
    for a, b in merges:
        keep.update((a, b, a + b))
    vocab = {tok: id for tok, id in model["vocab"].items() if tok in keep}
    missing = keep - vocab.keys()
    if missing:
        raise SystemExit(f"tokens of the kept merges missing from Qwen3's vocabulary: {sorted(missing)[:5]}")
    small = dict(full, model=dict(model, vocab=vocab, merges=merges))
    # mtime=0 and a fixed name, as gzip -n: the output depends on the input only.
    with open(f"{DST}/tokenizer.json.gz", "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw, mtime=0) as f:
            f.write(json.dumps(small, ensure_ascii=False, indent=1).encode("utf-8"))
    shutil.copyfile(f"{SRC}/tokenizer_config.json", f"{DST}/tokenizer_config.json")


if __name__ == "__main__":
    main()
