# The project installs what it needs itself: Go modules come from the module proxy and
# staticcheck is a tool dependency in go.mod (`go tool staticcheck`).
GO ?= go
BIN := bin/router

.PHONY: build run test lint fuzz bench update tidy redis

build:
	$(GO) build -o $(BIN) ./cmd/router

# The router on the embedded demo config with simulated engines, on 127.0.0.1:30000.
run: build
	./$(BIN) serve --demo

# The shared-binding tests run a real redis-server and fail without one; `make test`
# installs Debian's package first when it is missing (as root, like CI).
redis:
	command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)

test: redis
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

# A short fuzzing run of the compiler, the migrator, the request decoders, the load-report
# parsers, the KV-event decoder and the tokenizer; FUZZTIME=5m for a longer one. Seed corpora are
# committed under each package's testdata/fuzz.
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./compiler -run '^$$' -fuzz '^FuzzCompile$$' -fuzztime $(FUZZTIME)
	$(GO) test ./compiler/legacy -run '^$$' -fuzz '^FuzzMigrate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./compiler/legacy -run '^$$' -fuzz '^FuzzBucketFile$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/strictjson -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/server -run '^$$' -fuzz '^FuzzDecodeChat$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/server -run '^$$' -fuzz '^FuzzExplainRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/monitor -run '^$$' -fuzz '^FuzzLoadReports$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/state/kv -run '^$$' -fuzz '^FuzzDecodeMessage$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/hf -run '^$$' -fuzz '^FuzzScanner$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/token/hf -run '^$$' -fuzz '^FuzzRoundTrip$$' -fuzztime $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Rewrite the expected output of testscripts after an intended change.
update:
	ROUTER_UPDATE=1 $(GO) test ./cmd/router -run TestScripts

tidy:
	$(GO) mod tidy -diff
