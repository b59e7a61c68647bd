#!/usr/bin/env python3
"""Reference SGLang page hashes, independent of the Go code.

Reads a JSON list of {"block_size": int, "token_ids": [int]} from stdin and writes the same
list with "hashes" added: one signed int64 per full block, computed as SGLang does in
python/sglang/srt/mem_cache/utils.py (hash_page chained over full pages, then
hash_str_to_int64 of the hex digest's first 16 characters).

Regenerate the golden file with:
    python3 sglang_block_hash.py < block_hashes.golden.json > x && mv x block_hashes.golden.json
"""
import hashlib
import json
import sys


def hash_page(token_ids, prior_hash=None):
    hasher = hashlib.sha256()
    if prior_hash:
        hasher.update(bytes.fromhex(prior_hash))
    for t in token_ids:
        hasher.update(t.to_bytes(4, byteorder="little", signed=False))
    return hasher.hexdigest()


def hash_str_to_int64(hash_str):
    value = int(hash_str[:16], 16)
    return value - (1 << 64) if value >= (1 << 63) else value


def block_hashes(token_ids, block_size):
    out, prior = [], None
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        prior = hash_page(token_ids[start:start + block_size], prior)
        out.append(hash_str_to_int64(prior))
    return out


def main():
    cases = json.load(sys.stdin)
    for case in cases:
        case["hashes"] = block_hashes(case["token_ids"], case["block_size"])
    # One case per line keeps the golden file short and its diffs readable.
    sys.stdout.write("[\n" + ",\n".join(json.dumps(c) for c in cases) + "\n]\n")


if __name__ == "__main__":
    main()
