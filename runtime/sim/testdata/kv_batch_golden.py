#!/usr/bin/env python3
"""Writes kv_batch.golden.hex: one KV event batch as SGLang's publisher encodes it.

SGLang serialises EventBatch and its events with msgspec (array_like=True, tag=True,
omit_defaults=True): positional arrays led by the class name, trailing default fields left
out. This script builds the same arrays by hand and packs them with the msgpack package
(Debian: python3-msgpack), independently of the Go encoder under test. The hashes are
SGLang's page hashes of token blocks [1, 2, 3, 4] and [5, 6, 7, 8] (block size 4).

    /usr/bin/python3 kv_batch_golden.py > kv_batch.golden.hex
"""
import msgpack

H1, H2 = -3488128144981237669, 5674439469042975057
batch = [
    1700000000.25,  # ts
    [
        ["BlockStored", [H1], None, [1, 2, 3, 4], 4, None, "GPU"],
        ["BlockStored", [H2], H1, [5, 6, 7, 8], 4, None, "GPU"],
        ["BlockRemoved", [H2], "GPU"],
        ["AllBlocksCleared"],
    ],
    1,  # dp_rank
]
print(msgpack.packb(batch, use_bin_type=True).hex())
