package hf

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token"
	"github.com/routerkit/router/runtime/token/chattemplate"
)

// Model is a model's tokenizer as its engines run it: the tokenizer.json vocabulary and
// the chat template that turns a conversation into the prompt it encodes.
type Model struct {
	tok  *Tokenizer
	tmpl *chattemplate.Model
	// engine is whose request handling renders reproduce: SGLang and vLLM rebuild
	// messages and tools differently before the template sees them.
	engine chattemplate.Engine
	// special, when not nil, are the ids a text encoded with special tokens opens and
	// closes with, taken from the tokenizer config instead of tokenizer.json's
	// post-processor, as transformers does for Llama-class tokenizers (see
	// chattemplate.Config.SpecialTokensFromConfig).
	special *[2][]uint32
}

var _ token.Tokenizer = (*Model)(nil)

// FileError is a failure to load one of a tokenizer's files; Field names the config
// field that gave the file, so the compiler can point at it.
type FileError struct {
	Field string
	Err   error
}

func (e *FileError) Error() string { return e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// ForModel returns the tokenizer of a compiled model: its HuggingFace tokenizer when the
// plan names one, and the stand-in vocabulary otherwise.
func ForModel(m *plan.Model) (token.Tokenizer, error) {
	if m.Tokenizer == nil {
		return token.Standin{}, nil
	}
	return Open(*m.Tokenizer)
}

// Describe names a model's tokenizer for explanations and logs.
func Describe(m *plan.Model) string {
	if m.Tokenizer == nil {
		return "the stand-in vocabulary"
	}
	return m.Tokenizer.Path
}

// loaded memoizes Load within a process: the compiler checks a tokenizer by loading it,
// then serve, explain and sim run the same one, and loading Qwen3's 11 MB file takes most
// of a second. There is one entry per configured tokenizer path, holding the tokenizer
// of the file's size and modification time when it was loaded: an edited file is loaded
// anew and replaces its entry, so that reloads after edits do not keep every version
// (7.5 MB each for Qwen3's) for the life of the process.
var loaded struct {
	sync.Mutex
	m map[string]loadedFile
}

type loadedFile struct {
	stamp string // size and modification time
	tok   *Tokenizer
}

// loadShared is Load through the memo. A *Tokenizer is safe for concurrent use.
func loadShared(path string) (*Tokenizer, error) {
	stamp := ""
	if info, err := os.Stat(path); err == nil {
		stamp = fmt.Sprintf("%d|%d", info.Size(), info.ModTime().UnixNano())
	}
	loaded.Lock()
	e, ok := loaded.m[path]
	loaded.Unlock()
	if ok && stamp != "" && e.stamp == stamp {
		return e.tok, nil
	}
	t, err := Load(path)
	if err != nil {
		return nil, err
	}
	loaded.Lock()
	defer loaded.Unlock()
	if loaded.m == nil {
		loaded.m = map[string]loadedFile{}
	}
	loaded.m[path] = loadedFile{stamp: stamp, tok: t}
	return t, nil
}

// Open loads the files a compiled tokenizer names: the vocabulary, the tokenizer config
// with its special tokens and chat template, and a template that replaces the config's.
// The template is checked on sample conversations, so a construct the renderer cannot
// handle fails here rather than on a request.
func Open(t plan.Tokenizer) (*Model, error) {
	tok, err := loadShared(t.Path)
	if err != nil {
		return nil, &FileError{Field: "path", Err: err}
	}
	var cfg chattemplate.Config
	field := "config"
	if t.Config != "" {
		if cfg, err = chattemplate.LoadConfig(t.Config); err != nil {
			return nil, &FileError{Field: field, Err: err}
		}
	}
	switch {
	case t.ChatTemplate != "":
		cfg.ChatTemplate, cfg.ToolUseTemplate, field = t.ChatTemplate, "", "chat_template"
	case t.ChatTemplateFile != "":
		data, err := os.ReadFile(t.ChatTemplateFile)
		if err != nil {
			return nil, &FileError{Field: "chat_template_file", Err: fmt.Errorf("reading the chat template: %w", err)}
		}
		cfg.ChatTemplate, cfg.ToolUseTemplate, field = string(data), "", "chat_template_file"
	}
	if cfg.ChatTemplate == "" {
		// Chat requests are what the router serves, and a conversation cannot be
		// tokenized as the engine does without the engine's template.
		return nil, &FileError{Field: "config", Err: errors.New("the tokenizer has no chat template: name a tokenizer_config.json that has one with config, or give chat_template or chat_template_file")}
	}
	tmpl, err := cfg.Compile()
	if err == nil {
		err = tmpl.Check()
	}
	if err != nil {
		return nil, &FileError{Field: field, Err: err}
	}
	engine := chattemplate.SGLang
	if t.EngineKind == plan.KindVLLM {
		engine = chattemplate.VLLM
	}
	m := &Model{tok: tok, tmpl: tmpl, engine: engine}
	if fromConfig, bos, eos := cfg.SpecialTokensFromConfig(); fromConfig {
		m.special = new([2][]uint32)
		for i, want := range []struct {
			add  bool
			text string
		}{{bos, cfg.BOSToken}, {eos, cfg.EOSToken}} {
			if !want.add {
				continue
			}
			id, ok := tok.TokenID(want.text)
			if !ok {
				return nil, &FileError{Field: "config", Err: fmt.Errorf("special token %q is not in the tokenizer's vocabulary: is the config the tokenizer's own?", want.text)}
			}
			m.special[i] = []uint32{id}
		}
	}
	return m, nil
}

// Encode implements token.Tokenizer.
func (m *Model) Encode(meter *token.Meter, text string, addSpecial bool) ([]uint32, error) {
	if !addSpecial || m.special == nil {
		return m.tok.Encode(meter, text, addSpecial)
	}
	ids, err := m.tok.Encode(meter, text, false)
	if err != nil {
		return nil, err
	}
	pre, suf := m.special[0], m.special[1]
	if len(pre)+len(suf) == 0 {
		return ids, nil
	}
	out := append(append(append(token.IDs(len(pre)+len(ids)+len(suf)), pre...), ids...), suf...)
	token.Recycle(ids)
	return out, nil
}

// CacheStats returns the counters of the tokenizer's segment cache.
func (m *Model) CacheStats() token.SegmentStats { return m.tok.CacheStats() }

// Decode implements token.Tokenizer.
func (m *Model) Decode(ids []uint32) (string, error) { return m.tok.Decode(ids) }

// EncodeChat implements token.Tokenizer: the rendered prompt already holds the template's
// special tokens (BOS included), so it is encoded without adding them again, as SGLang
// and vLLM do. The rendered prompt is what meter's budget is charged.
func (m *Model) EncodeChat(meter *token.Meter, c token.Chat) ([]uint32, error) {
	if err := meter.Err(); err != nil {
		return nil, err
	}
	prompt, err := m.tmpl.Render(c, chattemplate.Options{AddGenerationPrompt: !c.NoGenerationPrompt, Engine: m.engine})
	if err != nil {
		return nil, err
	}
	return m.tok.Encode(meter, prompt, false)
}
