#!/usr/bin/env python3
"""A KV-event publisher on libzmq itself (Debian: python3-zmq, python3-msgpack), for the
router's interop test (runtime/state/kv/libzmq_test.go). Usage:

    /usr/bin/python3 libzmq_pub.py bind|connect ENDPOINT TOPIC

bind: the PUB socket binds ENDPOINT and the router dials it (kv_events.mode: connect), as
SGLang and vLLM do for a wildcard endpoint; connect: the PUB socket dials a router
listening there (kv_events.mode: bind). It publishes the router's wire format, as SGLang's
ZmqEventPublisher does: [topic, 8-byte big-endian sequence from 0, msgpack batch
[ts, [event...], dp_rank]], with two chained pages of 16 tokens (ids 1-32), every 20 ms
until killed or for 60 s, so a slow-joining subscriber still gets them.
"""
import struct
import sys
import time

import msgpack
import zmq

mode, endpoint, topic = sys.argv[1:4]
sock = zmq.Context().socket(zmq.PUB)
if mode == "bind":
    sock.bind(endpoint)
else:
    sock.connect(endpoint)

H1, H2 = 7140985466337350981, -2312204917362946111  # arbitrary engine hashes
batch = [
    0.0,
    [
        ["BlockStored", [H1], None, list(range(1, 17)), 16, None, "GPU"],
        ["BlockStored", [H2], H1, list(range(17, 33)), 16, None, "GPU"],
    ],
    0,
]
seq = 0
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    batch[0] = time.time()
    sock.send_multipart([topic.encode(), struct.pack(">Q", seq), msgpack.packb(batch, use_bin_type=True)])
    seq += 1
    time.sleep(0.02)
