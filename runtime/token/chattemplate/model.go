package chattemplate

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/routerkit/router/runtime/token"
)

// Model is a model's compiled chat templates with its special tokens: what the router
// holds per model to render requests as the model's engines do. Safe for concurrent use.
type Model struct {
	cfg           Config
	chat, toolUse *Template
}

// Compile parses the config's templates. Call Check on the result to render sample
// conversations before serving.
func (c Config) Compile() (*Model, error) {
	chat, err := Parse(c.ChatTemplate)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: c, chat: chat}
	if c.ToolUseTemplate != "" {
		if m.toolUse, err = Parse(c.ToolUseTemplate); err != nil {
			return nil, fmt.Errorf("tool_use template: %w", err)
		}
	}
	return m, nil
}

// Check runs Template.Check on each of the model's templates.
func (m *Model) Check() error {
	if err := m.chat.Check(); err != nil {
		return err
	}
	if m.toolUse != nil {
		if err := m.toolUse.Check(); err != nil {
			return fmt.Errorf("tool_use template: %w", err)
		}
	}
	return nil
}

// Render renders c with the template transformers picks: "tool_use" when the engine
// passes tools (not None) and the config has one, else the default. Empty BOSToken and
// EOSToken in o are taken from the config.
func (m *Model) Render(c token.Chat, o Options) (string, error) {
	if o.BOSToken == "" {
		o.BOSToken = m.cfg.BOSToken
	}
	if o.EOSToken == "" {
		o.EOSToken = m.cfg.EOSToken
	}
	t := m.chat
	if m.toolUse != nil && o.Engine.passesTools(c.Tools) {
		t = m.toolUse
	}
	return t.Render(c, o)
}

// passesTools reports whether engine e calls apply_chat_template with tools other than
// None for the request's raw tools: vLLM for any array, SGLang for a non-empty one.
func (e Engine) passesTools(raw json.RawMessage) bool {
	if absentRaw(raw) {
		return false
	}
	if e == SGLang {
		var tools []json.RawMessage
		return json.Unmarshal(raw, &tools) != nil || len(tools) > 0
	}
	return true
}

// absentRaw reports whether a raw JSON field is absent or null, whitespace aside.
func absentRaw(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}
