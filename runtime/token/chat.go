package token

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Message is one chat message as the tokenizer sees it: a role and its text.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// The chat template's markers are single special tokens, as in ChatML, so they never merge
// with the text around them.
var (
	imStart = hash("<|im_start|>")
	imEnd   = hash("<|im_end|>")
	newline = hash("\n")
)

// perMessageSpecials is the number of template tokens around each message besides its role
// and content: <|im_start|>, the newline after the role, and <|im_end|>.
const perMessageSpecials = 3

// EncodeChat returns the token ids of a conversation rendered with a ChatML-like template:
// for each message, in order, <|im_start|>, the role's tokens, a newline, the content's
// tokens and <|im_end|>.
//
// Each message is encoded on its own and no generation prompt is appended, so the ids of a
// conversation are a prefix of the ids of any conversation that continues it. That is the
// property prefix caching relies on: a follow-up turn hits the blocks of the previous turn.
//
// A content's ids depend on the content alone, so long contents are looked up in the
// stand-in's segment cache: a conversation that resends its history encodes only what is
// new.
func EncodeChat(msgs []Message) []uint32 {
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
	}
	// The stand-in makes about one id per five bytes of English; append grows the rest.
	ids := IDs(n/5 + perMessageSpecials*len(msgs) + 8)
	for _, m := range msgs {
		ids = append(ids, imStart)
		ids = AppendEncode(ids, m.Role)
		ids = append(ids, newline)
		ids = standinSegments.Append(ids, m.Content, AppendEncode)
		ids = append(ids, imEnd)
	}
	return ids
}

// CountChat returns len(EncodeChat(msgs)) without allocating.
func CountChat(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += perMessageSpecials + Count(m.Role) + Count(m.Content)
	}
	return n
}

// plainString returns the text of a JSON string literal that needs no decoding: no escape
// and valid UTF-8 (json.Unmarshal would replace invalid bytes), so the bytes between the
// quotes are the text. The literal is already validated by the decoder that called
// UnmarshalJSON. On a long message this saves a second scan of the content.
func plainString(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[len(lit)-1] != '"' {
		return "", false
	}
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') >= 0 || bytes.IndexByte(inner, '"') >= 0 || !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}

// UnmarshalJSON decodes an OpenAI chat message. Content may be a string, null (an assistant
// message that only calls tools) or an array of content parts; the text parts of an array
// are joined with newlines, as vLLM does, and other parts (images, audio) are ignored.
// Keeping this here means the router and the simulator flatten messages the same way.
func (m *Message) UnmarshalJSON(data []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	m.Content = ""
	content := bytes.TrimSpace(raw.Content)
	switch {
	case len(content) == 0 || bytes.Equal(content, []byte("null")):
		return nil
	case content[0] == '"':
		if s, ok := plainString(content); ok {
			m.Content = s
			return nil
		}
		return json.Unmarshal(content, &m.Content)
	case content[0] == '[':
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(content, &parts); err != nil {
			return fmt.Errorf("message content parts: %w", err)
		}
		texts := make([]string, 0, len(parts))
		for _, p := range parts {
			if p.Type == "text" && p.Text != nil {
				texts = append(texts, *p.Text)
			}
		}
		m.Content = strings.Join(texts, "\n")
		return nil
	}
	return fmt.Errorf("message content must be a string or an array of parts, not %.20s", content)
}
