// Package sim simulates SGLang-compatible inference engines for demos, tests and
// benchmarks of the router, where no GPU is available.
//
// Each simulated engine is a real HTTP server on 127.0.0.1 that speaks the engine side of
// the router's wire contracts: OpenAI chat completions (JSON and SSE), health, model and
// server info, load reports in SGLang's three shapes (/v1/loads, /get_load, /metrics),
// cache flushes, KV-cache events over a ZMQ PUB socket in SGLang's format, and the
// bootstrap fields of prefill/decode disaggregation. Behind the API each data-parallel rank
// runs a small model of continuous batching with a paged prefix cache, so a router that
// routes well measurably gets shorter queues and more cache hits.
//
// Start engines in process with [Start]; `router sim` is a thin command around it. Faults
// (errors, hangs, cut streams, slowness, bad health, stale or malformed load) can be set at
// start in [EngineSpec.Faults] and changed at run time with [Engine.SetFaults] or the
// /sim/faults endpoint. docs/simulator.md describes the endpoints for operators.
package sim
