package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// Config is what rendering needs from a HuggingFace tokenizer_config.json.
type Config struct {
	// ChatTemplate is the template used without tools: the string form of chat_template,
	// or the entry named "default" of its list form.
	ChatTemplate string
	// ToolUseTemplate is the list form's "tool_use" entry, used instead of ChatTemplate
	// when a request has tools; "" when there is none.
	ToolUseTemplate string
	// BOSToken and EOSToken are the special tokens templates print as bos_token and
	// eos_token; "" when the file sets them to null or leaves them out.
	BOSToken, EOSToken string
	// ModelMaxLength is the tokenizer's model_max_length, 0 when unknown (absent, or HF's
	// "no limit" sentinel int(1e30)).
	ModelMaxLength int
	// TokenizerClass is tokenizer_config.json's tokenizer_class ("" when absent), and
	// AddBOSToken and AddEOSToken its add_bos_token and add_eos_token (nil when absent):
	// for some classes transformers adds the special tokens from these rather than from
	// tokenizer.json (see SpecialTokensFromConfig).
	TokenizerClass           string
	AddBOSToken, AddEOSToken *bool
}

// llamaClasses are the tokenizer classes whose fast tokenizer rebuilds tokenizer.json's
// post-processor from add_bos_token (default true) and add_eos_token (default false) when
// it loads: transformers' LlamaTokenizerFast.update_post_processor
// (src/transformers/models/llama/tokenization_llama_fast.py, called from __init__; the
// Code Llama and Gemma fast tokenizers copy it). AutoTokenizer loads the fast class for a
// config naming the slow one.
var llamaClasses = map[string]bool{
	"LlamaTokenizer": true, "LlamaTokenizerFast": true,
	"CodeLlamaTokenizer": true, "CodeLlamaTokenizerFast": true,
	"GemmaTokenizer": true, "GemmaTokenizerFast": true,
}

// SpecialTokensFromConfig reports whether transformers takes the special tokens a text
// encodes with from this config instead of tokenizer.json's post-processor, and which:
// bos and eos say whether BOSToken and EOSToken open and close the ids. DeepSeek-V3's
// tokenizer.json, for one, has only a ByteLevel post-processor, while its config names
// LlamaTokenizerFast with add_bos_token: every engine's text prompt starts with BOS.
func (c Config) SpecialTokensFromConfig() (fromConfig, bos, eos bool) {
	if !llamaClasses[c.TokenizerClass] {
		return false, false, false
	}
	bos = c.AddBOSToken == nil || *c.AddBOSToken
	eos = c.AddEOSToken != nil && *c.AddEOSToken
	return true, bos && c.BOSToken != "", eos && c.EOSToken != ""
}

// noLimit is HF's VERY_LARGE_INTEGER, written as model_max_length when a tokenizer has
// no limit.
const noLimit = 1e30

// LoadConfig reads a tokenizer_config.json. When the file has no chat_template, a
// chat_template.jinja beside it is used, as transformers ≥ 4.50 saves templates there.
// Errors name the file and say how to fix it.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read tokenizer config: %w", err)
	}
	var raw struct {
		ChatTemplate   json.RawMessage `json:"chat_template"`
		BOSToken       json.RawMessage `json:"bos_token"`
		EOSToken       json.RawMessage `json:"eos_token"`
		ModelMaxLength json.RawMessage `json:"model_max_length"`
		TokenizerClass string          `json:"tokenizer_class"`
		AddBOSToken    *bool           `json:"add_bos_token"`
		AddEOSToken    *bool           `json:"add_eos_token"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("%s: not a tokenizer_config.json: %w", path, err)
	}
	c := Config{TokenizerClass: raw.TokenizerClass, AddBOSToken: raw.AddBOSToken, AddEOSToken: raw.AddEOSToken}
	if c.ChatTemplate, c.ToolUseTemplate, err = templates(raw.ChatTemplate); err != nil {
		return Config{}, fmt.Errorf("%s: chat_template: %w", path, err)
	}
	if c.ChatTemplate == "" {
		side := filepath.Join(filepath.Dir(path), "chat_template.jinja")
		b, err := os.ReadFile(side)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return Config{}, fmt.Errorf("%s: no chat_template, and no chat_template.jinja beside it: use the model's own tokenizer_config.json, which carries its template", path)
		case err != nil:
			return Config{}, fmt.Errorf("read chat template: %w", err)
		}
		c.ChatTemplate = string(b)
	}
	if c.BOSToken, err = specialToken(raw.BOSToken); err != nil {
		return Config{}, fmt.Errorf("%s: bos_token: %w", path, err)
	}
	if c.EOSToken, err = specialToken(raw.EOSToken); err != nil {
		return Config{}, fmt.Errorf("%s: eos_token: %w", path, err)
	}
	if c.ModelMaxLength, err = maxLength(raw.ModelMaxLength); err != nil {
		return Config{}, fmt.Errorf("%s: model_max_length: %w", path, err)
	}
	return c, nil
}

// templates reads chat_template in its string form or HF's list form
// [{"name": "default", "template": …}, {"name": "tool_use", "template": …}]. The list
// must have a "default": HF fails every request without tools otherwise.
func templates(raw json.RawMessage) (def, toolUse string, err error) {
	raw = bytes.TrimSpace(raw)
	if absentRaw(raw) {
		return "", "", nil
	}
	if raw[0] == '"' {
		err := json.Unmarshal(raw, &def)
		if err == nil && def == "" {
			err = errors.New(`is empty: remove it or give the model's template`)
		}
		return def, "", err
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", "", errors.New(`must be a string or a list of {"name": …, "template": …}`)
	}
	for _, t := range list {
		switch t.Name {
		case "default":
			def = t.Template
		case "tool_use":
			toolUse = t.Template
		}
	}
	if def == "" {
		return "", "", errors.New(`the list has no "default" template: add {"name": "default", "template": …}`)
	}
	return def, toolUse, nil
}

// specialToken reads a token written as a string, as an AddedToken object
// {"content": …, …}, or as null.
func specialToken(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if absentRaw(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var added struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &added); err != nil || added.Content == nil {
		return "", errors.New(`must be a string, null or an object with "content"`)
	}
	return *added.Content, nil
}

// maxLength reads model_max_length; absent or HF's no-limit sentinel is 0.
func maxLength(raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	if absentRaw(raw) {
		return 0, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f < 0 || f != float64(int64(f)) && f < noLimit {
		return 0, errors.New("must be a non-negative integer")
	}
	if f >= noLimit {
		return 0, nil
	}
	return int(f), nil
}
