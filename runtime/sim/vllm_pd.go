package sim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/plan"
)

// kvTransferParams is vLLM's disaggregation field, on requests and responses alike
// (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py). A router asks a
// prefill engine for a remote decode with do_remote_decode; the engine answers with
// do_remote_prefill and where its KV blocks are, and the router hands exactly that to
// the decode engine, which pulls the blocks instead of prefilling.
type kvTransferParams struct {
	DoRemoteDecode  bool    `json:"do_remote_decode"`
	DoRemotePrefill bool    `json:"do_remote_prefill"`
	RemoteEngineID  *string `json:"remote_engine_id"`
	RemoteRequestID *string `json:"remote_request_id,omitempty"`
	RemoteBlockIDs  []int   `json:"remote_block_ids"`
	RemoteHost      *string `json:"remote_host"`
	RemotePort      *int    `json:"remote_port"`
	TPSize          int     `json:"tp_size,omitempty"`
}

// remoteDecode reports whether a vLLM-kind request asks this engine to prefill for a
// decode elsewhere.
func (e *Engine) remoteDecode(req *chatRequest) bool {
	return e.spec.Kind == plan.KindVLLM && req != nil && req.KVTransferParams != nil && req.KVTransferParams.DoRemoteDecode
}

// remotePrefill reports whether a vLLM-kind request carries a finished prefill's KV.
func (e *Engine) remotePrefill(req *chatRequest) bool {
	return e.spec.Kind == plan.KindVLLM && req != nil && req.KVTransferParams != nil && req.KVTransferParams.DoRemotePrefill
}

// vllmTransferKey names a prefill's KV hand-over among the fleet's rooms: the prefill
// engine's id stands for the bootstrap address, the request number for the room.
func vllmTransferKey(engineID string, n uint64) roomKey {
	return roomKey{addr: "vllm:" + engineID, room: n}
}

// newTransfer starts a remote-decode prefill's hand-over and returns its parameters for
// the decode engine, as NixlConnector.request_finished does once the one-token prefill
// stopped on its length cap. The room is finished when the prefill has run.
func (e *Engine) newTransfer(j *job) *kvTransferParams {
	n := rand.Uint64()
	id, rid := e.spec.ID, "sim-"+strconv.FormatUint(n, 16)
	host, portStr, _ := strings.Cut(strings.TrimPrefix(e.url, "http://"), ":")
	port, _ := strconv.Atoi(portStr)
	blocks := make([]int, (j.inputs+e.spec.Config.BlockSize-1)/e.spec.Config.BlockSize)
	for i := range blocks {
		blocks[i] = i + 1
	}
	j.transfer = vllmTransferKey(id, n)
	return &kvTransferParams{DoRemotePrefill: true, RemoteEngineID: &id, RemoteRequestID: &rid,
		RemoteBlockIDs: blocks, RemoteHost: &host, RemotePort: &port, TPSize: 1}
}

// checkTransfer validates a decode request's kv_transfer_params against the fleet: a
// prefill engine of this process must have prefilled the named request (once). Params of
// an engine outside the fleet are taken on trust, since nothing here can check them.
func (e *Engine) checkTransfer(p *kvTransferParams) *badRequest {
	if p.RemoteEngineID == nil || p.RemoteRequestID == nil {
		return invalid("kv_transfer_params with do_remote_prefill need remote_engine_id and remote_request_id, as the prefill engine returned them.")
	}
	if !e.rooms.isLocal("vllm:" + *p.RemoteEngineID) {
		return nil
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(*p.RemoteRequestID, "sim-"), 16, 64)
	if err != nil || !strings.HasPrefix(*p.RemoteRequestID, "sim-") {
		return invalid("Unknown remote_request_id %q of engine %s.", *p.RemoteRequestID, *p.RemoteEngineID)
	}
	if err := e.rooms.consume(vllmTransferKey(*p.RemoteEngineID, n)); err != nil {
		return &badRequest{status: http.StatusBadRequest, msg: fmt.Sprintf("KV transfer from %s failed: %v.", *p.RemoteEngineID, err)}
	}
	return nil
}
