# The project installs what it needs itself: Go modules come from the module proxy and
# staticcheck is a tool dependency in go.mod (`go tool staticcheck`).
GO ?= go
BIN := bin/router

.PHONY: build run test lint fuzz bench bench-quality bench-proxy bench-long bench-polling bench-kv conformance update tidy redis python3-zmq wrk-nginx

build:
	$(GO) build -o $(BIN) ./cmd/router

# The router on the embedded demo config with simulated engines, on 127.0.0.1:30000.
run: build
	./$(BIN) serve --demo

# The shared-binding tests run a real redis-server and fail without one; `make test`
# installs Debian's package first when it is missing (as root, like CI).
redis:
	command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)

# The KV-event interop test (runtime/state/kv TestLibzmqPublishers) publishes through
# libzmq itself with Debian's python3-zmq, for /usr/bin/python3, and fails without it.
python3-zmq:
	/usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null || (apt-get update && apt-get install -y python3-zmq python3-msgpack)

# bench-proxy's second harness (wrk) and its nginx target; bench/proxy's TestWrkTrial runs
# wrk and fails without it.
wrk-nginx:
	command -v wrk >/dev/null && command -v nginx >/dev/null || (apt-get update && apt-get install -y wrk nginx-light)

# go test's default 10-minute limit per package is too tight for a busy 2-core CI box:
# cmd/router's testscripts took 7.5 minutes there under -race with the load average at 13.
# 30 minutes is headroom for a slow machine, still a bound for a hung test. -p stays at go
# test's default, one package per core.
TEST_TIMEOUT ?= 30m
# vet and the tests without -race build as the Dockerfile does (CGO_ENABLED=0 -trimpath;
# nothing here uses cgo), so deploy's TestDockerfileBuildsStaticNonRoot links what vet
# compiled: on an empty build cache that build was a third compile of every package, 68 s
# of a 10-minute run on two quiet cores, and now takes 2 s.
STATIC := CGO_ENABLED=0
test: redis python3-zmq wrk-nginx
	$(STATIC) $(GO) vet -trimpath ./...
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	# The KV index's tests run a second time with Go maps in place of its own tables
	# (-tags kvgomap, the switch back; docs/differences.md).
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -tags kvgomap ./runtime/state/kv/
	ROUTER_MONITOR_SHARDS=off $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./runtime/monitor/
	ROUTER_RAW_TCP=off $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./runtime/server/ ./runtime/upstream/ ./runtime/h1/ ./runtime/state/kv/
	# The race detector's build reads and writes through package syscall (runtime/rawtcp's
	# rw_race.go): the raw system calls themselves are tested without it.
	$(STATIC) $(GO) test -trimpath -count=1 -timeout $(TEST_TIMEOUT) ./runtime/rawtcp/ ./runtime/h1/ ./runtime/upstream/ ./runtime/state/kv/

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

# A short fuzzing run of the compiler, the migrator, the request decoders (and their memory
# per byte), the load-report parsers, the ZMTP framing bounds, the KV-event decoder, the
# tokenizer and the log-line encoder (against slog); FUZZTIME=5m for a longer one. Seed
# corpora are committed under each package's testdata/fuzz.
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./compiler -run '^$$' -fuzz '^FuzzCompile$$' -fuzztime $(FUZZTIME)
	$(GO) test ./compiler/legacy -run '^$$' -fuzz '^FuzzMigrate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./compiler/legacy -run '^$$' -fuzz '^FuzzBucketFile$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/strictjson -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/strictjson -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/strictjson -run '^$$' -fuzz '^FuzzValid$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/strictjson -run '^$$' -fuzz '^FuzzAllocationPerByte$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/request -run '^$$' -fuzz '^FuzzDecodeChat$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/request -run '^$$' -fuzz '^FuzzDecodeRequests$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/request -run '^$$' -fuzz '^FuzzPromptsOf$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/dispatch -run '^$$' -fuzz '^FuzzBootstrap$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/server -run '^$$' -fuzz '^FuzzExplainRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/monitor -run '^$$' -fuzz '^FuzzLoadReports$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/monitor -run '^$$' -fuzz '^FuzzReadHead$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/monitor -run '^$$' -fuzz '^FuzzShardParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/h1 -run '^$$' -fuzz '^FuzzServeConn$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/h1 -run '^$$' -fuzz '^FuzzRequestMatchesReadRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/upstream -run '^$$' -fuzz '^FuzzHeadMatchesRequestWrite$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/upstream -run '^$$' -fuzz '^FuzzAnswerMatchesReadResponse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/state/kv/zmtp -run '^$$' -fuzz '^FuzzConn$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/state/kv -run '^$$' -fuzz '^FuzzDecodeMessage$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/state/kv -run '^$$' -fuzz '^FuzzScanMatchesGeneric$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/state/kv -run '^$$' -fuzz '^FuzzTable$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/hf -run '^$$' -fuzz '^FuzzScanner$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/hf -run '^$$' -fuzz '^FuzzSegmentCache$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token -run '^$$' -fuzz '^FuzzChainCache$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/chattemplate -run '^$$' -fuzz '^FuzzNativeQwen3$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/logline -run '^$$' -fuzz '^FuzzMatchesStandardHandlers$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/hf -run '^$$' -fuzz '^FuzzRoundTrip$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/hf -run '^$$' -fuzz '^FuzzMerge$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/hf -run '^$$' -fuzz '^FuzzWholeTable$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/hf -run '^$$' -fuzz '^FuzzCharsExact$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/hf -run '^$$' -fuzz '^FuzzNFC$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/hf -run '^$$' -fuzz '^FuzzFastLoad$$' -fuzztime $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The routing-quality benchmark (bench/quality, docs/benchmarks.md): every policy on four
# workloads against simulated engines under KV pressure, a few minutes. Writes
# docs/quality/results.md and docs/quality/ttft.svg. QUALITY_FLAGS=-short for a smoke run.
bench-quality:
	$(GO) run ./bench/cmd/quality -out docs/quality $(QUALITY_FLAGS)

# The side-by-side proxy overhead run (bench/proxy, docs/benchmarks.md): direct, a bare
# httputil.ReverseProxy, the router with three policies and with Qwen3 + cache_aware, and
# nginx, against simulated engines at time scale 0, at 1, 16 and 64 clients; then the same
# targets through wrk, a second harness. CPU per request from /proc, RSS per target, and
# the router ÷ nginx line at 16 clients last. PROXY_FLAGS="-rounds 1 -at-once-rounds 1
# -wrk-rounds 1" for a quick look.
bench-proxy: build wrk-nginx
	$(GO) run ./bench/cmd/proxy -router $(BIN) $(PROXY_FLAGS)

# The same run with a conversation of about 128k tokens whose history the router has seen
# (bench/proxy, docs/benchmarks.md), sent again (long) and grown by a turn per request
# (long_grow): what a long prompt adds over direct and the router's CPU per request, with
# the stand-in vocabulary and with Qwen3's tokenizer and chat template, one client at a time.
bench-long: build
	$(GO) run ./bench/cmd/proxy -router $(BIN) -kinds long,long_grow -concurrency 1 -requests 60 \
		-policies power_of_two,cache_aware -tokenizers standin,testdata/tokenizers/qwen3 -extra-routers '' -wrk-rounds 0 $(PROXY_FLAGS)

# What an idle router spends polling health and load of 8, 64, 512 and 2048 simulated
# engines, as CPU of its process (bench/cmd/polling).
bench-polling: build
	$(GO) run ./bench/cmd/polling -router $(BIN)

# What indexing KV events costs an idle cache_aware router, as CPU of its process over 4
# simulated engines whose events bench/cmd/kvevents publishes through ZMQ at 1 000, 10 000
# and 50 000 stored blocks/s, beside the same fleet publishing nothing (docs/benchmarks.md,
# "KV-event indexing cost"). KV_FLAGS='-encoding vllm' publishes vLLM's encoding.
bench-kv: build
	$(GO) run ./bench/cmd/kvevents -router $(BIN) $(KV_FLAGS)

# The router against an engine nobody here wrote (bench/conformance, docs/benchmarks.md
# "Conformance"): llm-d-inference-sim SIM_VERSION, downloaded from the Go module proxy as a
# module (the proxy hides its version list, so `go install ...@version` is refused) and
# built from that module's source into a temporary directory; its ZMQ is pure Go, so no
# cgo or Debian package is needed. Both KV-event formats in bind mode, a publisher
# restarting beside another on one endpoint, vLLM load from /metrics, prefix hits on
# repeated completions, and cache_aware vs power_of_two TTFT and cached-token fraction, on
# the llm-d simulators and, for the same workload, on the router's own simulator.
# Not part of `make test`. A few minutes, most of it the first build of the simulator.
SIM_VERSION ?= v0.10.2
conformance: build
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	src=$$(cd "$$tmp" && GOFLAGS= $(GO) mod download -json github.com/llm-d/llm-d-inference-sim@$(SIM_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p') && \
	test -n "$$src" && \
	(cd "$$src" && GOFLAGS= CGO_ENABLED=0 $(GO) build -o "$$tmp/llm-d-inference-sim" ./cmd/llm-d-inference-sim) && \
	$(GO) run ./bench/cmd/conformance -router $(BIN) -sim "$$tmp/llm-d-inference-sim" $(CONFORMANCE_FLAGS)

# Rewrite the expected output of testscripts after an intended change.
update:
	ROUTER_UPDATE=1 $(GO) test ./cmd/router -run TestScripts

tidy:
	$(GO) mod tidy -diff
