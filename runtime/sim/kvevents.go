package sim

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// kvEventKind is the type of a KV-cache event.
type kvEventKind uint8

const (
	blockStored kvEventKind = iota
	blockRemoved
	allBlocksCleared
)

// kvEvent is one change of a rank's prefix cache. SGLang publishes one event per page.
type kvEvent struct {
	kind      kvEventKind
	hash      int64
	parent    int64
	hasParent bool
	tokens    []uint32
}

// mediumGPU is the storage tier SGLang names for device memory.
const mediumGPU = "GPU"

// encodeBatch writes a batch of events as SGLang's msgspec encoder does (array_like,
// tagged, trailing defaults omitted):
//
//	[ts, [event...], dp_rank]
//	["BlockStored", [hash], parent|nil, [token_id...], block_size, nil, "GPU"]
//	["BlockRemoved", [hash], "GPU"]
//	["AllBlocksCleared"]
func encodeBatch(ts time.Time, events []kvEvent, dpRank, blockSize int) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	w := errWriter{enc: enc}
	w.do(enc.EncodeArrayLen(3))
	w.do(enc.EncodeFloat64(unixSeconds(ts)))
	w.do(enc.EncodeArrayLen(len(events)))
	for _, e := range events {
		switch e.kind {
		case blockStored:
			w.do(enc.EncodeArrayLen(7))
			w.do(enc.EncodeString("BlockStored"))
			w.hashes(e.hash)
			if e.hasParent {
				w.do(enc.EncodeInt(e.parent))
			} else {
				w.do(enc.EncodeNil())
			}
			w.do(enc.EncodeArrayLen(len(e.tokens)))
			for _, t := range e.tokens {
				w.do(enc.EncodeUint(uint64(t)))
			}
			w.do(enc.EncodeInt(int64(blockSize)))
			w.do(enc.EncodeNil()) // lora_id
			w.do(enc.EncodeString(mediumGPU))
		case blockRemoved:
			w.do(enc.EncodeArrayLen(3))
			w.do(enc.EncodeString("BlockRemoved"))
			w.hashes(e.hash)
			w.do(enc.EncodeString(mediumGPU))
		case allBlocksCleared:
			w.do(enc.EncodeArrayLen(1))
			w.do(enc.EncodeString("AllBlocksCleared"))
		}
	}
	w.do(enc.EncodeInt(int64(dpRank)))
	if w.err != nil {
		return nil, fmt.Errorf("encode kv event batch: %w", w.err)
	}
	return buf.Bytes(), nil
}

// unixSeconds is t as Python's time.time() reports it. Splitting seconds and nanoseconds
// keeps the float exact where a single float64 of UnixNano would round.
func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// errWriter keeps the first encoding error so encodeBatch reads as the format it writes.
type errWriter struct {
	enc *msgpack.Encoder
	err error
}

func (w *errWriter) do(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *errWriter) hashes(h int64) {
	w.do(w.enc.EncodeArrayLen(1))
	w.do(w.enc.EncodeInt(h))
}

// rankEndpoint returns the endpoint of DP rank r for an engine whose KV events endpoint is
// base: port base+r as SGLang does, on 127.0.0.1 whatever host base names, because the
// simulator never listens beyond the loopback interface. Port 0 stays 0 (any free port).
func rankEndpoint(base string, r int) (string, error) {
	addr, ok := strings.CutPrefix(base, "tcp://")
	if !ok {
		return "", fmt.Errorf("kv events endpoint %q: only tcp:// is supported", base)
	}
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("kv events endpoint %q: %w", base, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", fmt.Errorf("kv events endpoint %q: bad port", base)
	}
	if port != 0 {
		port += r
	}
	return "tcp://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// dialEndpoint returns the router endpoint rank r of a dialing publisher connects to:
// port base+r, as vLLM offsets a connecting publisher's port too
// (ZmqEventPublisher.offset_endpoint_port). A wildcard host means the local router.
func dialEndpoint(base string, r int) (string, error) {
	addr, ok := strings.CutPrefix(base, "tcp://")
	if !ok {
		return "", fmt.Errorf("kv events endpoint %q: only tcp:// is supported", base)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("kv events endpoint %q: %w", base, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port+r > 65535 {
		return "", fmt.Errorf("kv events endpoint %q: bad port", base)
	}
	if host == "" || host == "*" || net.ParseIP(host).IsUnspecified() {
		host = "127.0.0.1"
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(port+r)), nil
}
