package token

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/routerkit/router/runtime/arena"
	"github.com/routerkit/router/runtime/strictjson"
)

// Tokenizer computes, for a model, the token ids its engines compute for a prompt.
//
// Bucket limits are checked on these counts and cache-aware routing hashes these ids into
// the engine's block hashes, so an implementation must agree with the engine id for id:
// the router picks one per model from its plan, and request preparation never calls a
// package-level function.
type Tokenizer interface {
	// Encode returns the ids of a plain-text prompt, as the engine tokenizes the prompt of
	// /v1/completions or /generate. Special-token strings inside text are matched as
	// special tokens, as HuggingFace tokenizers do by default; addSpecial adds the
	// tokenizer's template tokens (a BOS token for Llama, nothing for Qwen).
	//
	// The text is charged to m's budget before any work, and the work stops soon after
	// m's context ends; the error is then the budget's *TooLargeError or the context's
	// error. A nil m bounds nothing.
	Encode(m *Meter, text string, addSpecial bool) ([]uint32, error)
	// EncodeChat renders a conversation with the model's chat template, as the engine does
	// for /v1/chat/completions, and returns the ids of the rendered prompt, which m
	// bounds as Encode's text.
	EncodeChat(m *Meter, c Chat) ([]uint32, error)
	// Decode returns the text of ids.
	Decode(ids []uint32) (string, error)
}

// Chat is the part of a chat request a chat template reads, kept as the client's JSON so
// that key order survives into the template: Python's json.dumps (behind `tojson`) keeps
// insertion order, and a prompt that renders tools in another order has other ids.
type Chat struct {
	// Messages is the request's messages array.
	Messages json.RawMessage
	// Tools is the request's tools array; empty or null means none.
	Tools json.RawMessage
	// Kwargs is the request's chat_template_kwargs object (e.g. enable_thinking); empty or
	// null means none.
	Kwargs json.RawMessage
	// NoGenerationPrompt leaves out the assistant header a template appends for the
	// answer (a request's add_generation_prompt: false); the zero value appends it.
	NoGenerationPrompt bool
	// ReasoningEffort is the request's top-level reasoning_effort (absent: empty), which
	// SGLang hands the template as a variable.
	ReasoningEffort json.RawMessage
	// ContinueFinalMessage is the request's continue_final_message: SGLang continues a
	// final assistant message instead of turning it into a user turn.
	ContinueFinalMessage bool
	// Decoded, when not nil, is Messages already decoded (the router decodes them once to
	// validate them). A tokenizer that reads only roles and text uses it instead of
	// decoding the messages again: on a long conversation that pass is the cost.
	Decoded []Message
	// Parsed, when not nil, holds Messages, Tools and Kwargs already parsed (the router
	// parses a chat body in one pass): a renderer builds its values from them instead of
	// parsing the JSON again. A nil field is an absent one.
	Parsed *ParsedChat
	// Arena, when not nil, lends a renderer the memory of the prompt it renders (see
	// package arena): the caller releases it once the prompt's ids are computed.
	Arena *arena.Bytes
}

// ParsedChat is the parsed form of a Chat's JSON fields, as strictjson.Parse reads them.
type ParsedChat struct {
	Messages, Tools, Kwargs *strictjson.Value
}

// ErrUnpredictable is wrapped by EncodeChat's error for a request whose prompt the engine
// builds in a way the router cannot reproduce (vLLM's multimodal placeholders): the
// request is still served, counted approximately and without prefix hashes.
var ErrUnpredictable = errors.New("the engine's prompt cannot be predicted")

// ErrNoDecode is returned by a tokenizer that cannot turn ids back into text.
var ErrNoDecode = errors.New("this tokenizer cannot decode ids: configure the model's HuggingFace tokenizer")

// Standin is the deterministic stand-in vocabulary of this package as a Tokenizer: what a
// model without a configured tokenizer uses, and what the simulator's engines compute.
type Standin struct{}

// Encode implements Tokenizer. The stand-in has no template tokens, so addSpecial is
// ignored. A long text is looked up in the stand-in's segment cache. The stand-in
// encodes hundreds of MB/s, so m's context is looked at once, when the text is charged.
func (Standin) Encode(m *Meter, text string, _ bool) ([]uint32, error) {
	if err := m.Charge(len(text)); err != nil {
		return nil, err
	}
	return standinSegments.Append(IDs(len(text)/5+1), text, AppendEncode), nil
}

// standinSegments is the stand-in's segment cache, shared by every model that uses the
// stand-in (its ids depend on nothing but the text).
var standinSegments = NewSegmentCache(DefaultSegmentBytes)

// CacheStats returns the counters of the stand-in's segment cache.
func (Standin) CacheStats() SegmentStats { return standinSegments.Stats() }

// CacheStatser is a tokenizer that keeps a segment cache.
type CacheStatser interface {
	CacheStats() SegmentStats
}

// EncodeChat implements Tokenizer with the ChatML-like template of EncodeChat; tools and
// template arguments are not part of it. The messages' roles and contents are charged
// to m.
func (Standin) EncodeChat(m *Meter, c Chat) ([]uint32, error) {
	msgs := c.Decoded
	if msgs == nil {
		if err := json.Unmarshal(c.Messages, &msgs); err != nil {
			return nil, fmt.Errorf("messages: %w", err)
		}
	}
	for _, msg := range msgs {
		if err := m.Charge(len(msg.Role) + len(msg.Content)); err != nil {
			return nil, err
		}
	}
	return EncodeChat(msgs), nil
}

// Decode implements Tokenizer: the stand-in's ids are hashes and have no text.
func (Standin) Decode([]uint32) (string, error) { return "", ErrNoDecode }

// CheckMessages checks what every chat template relies on: a non-empty array of messages,
// each with a role. What a message may hold beyond that is the template's business. The
// router and `router explain` check requests alike with it.
func CheckMessages(raw json.RawMessage) error {
	var msgs []Message
	return CheckDecoded(raw, msgs, json.Unmarshal(raw, &msgs))
}

// CheckDecoded is CheckMessages for a caller that has decoded raw into msgs already, with
// the decoding error err: the same checks and messages without a second pass.
func CheckDecoded(raw json.RawMessage, msgs []Message, err error) error {
	if err != nil || len(msgs) == 0 {
		if err != nil && len(raw) > 0 && string(raw) != "null" {
			return fmt.Errorf("messages: %w", err)
		}
		return errors.New("messages: at least one message is required")
	}
	for i, m := range msgs {
		if m.Role == "" {
			return fmt.Errorf("messages[%d].role: required", i)
		}
	}
	return nil
}
