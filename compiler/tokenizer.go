package compiler

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"cuelang.org/go/cue"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token/hf"
)

// checkTokenizer resolves a model's tokenizer files against the directory of the config
// file that names them, and loads them: a tokenizer that cannot be read, or a template the
// renderer cannot handle, is a configuration error here rather than a failing request.
func (c *checker) checkTokenizer(m *plan.Model) {
	t := m.Tokenizer
	if t == nil {
		return
	}
	at := sel("models", m.Name, "tokenizer")
	field := func(name string) []cue.Selector { return append(at[:len(at):len(at)], cue.Str(name)) }
	if t.ChatTemplate != "" && t.ChatTemplateFile != "" {
		c.at(field("chat_template_file"), "chat_template and chat_template_file both give the chat template: keep one")
		return
	}
	if t.EngineKind == "" {
		kind, ok := c.engineKind(m.Name)
		if !ok {
			c.at(field("path"), "model %q has SGLang and vLLM engines, which render chat templates differently: set tokenizer.engine_kind to the kind whose prompts prefix caching should match", m.Name)
			return
		}
		t.EngineKind = kind
	}
	t.Path = c.resolve(field("path"), t.Path)
	t.ChatTemplateFile = c.resolve(field("chat_template_file"), t.ChatTemplateFile)
	if t.Config != "" {
		t.Config = c.resolve(field("config"), t.Config)
	} else if beside := filepath.Join(filepath.Dir(t.Path), "tokenizer_config.json"); fileExists(beside) {
		t.Config = beside
	}
	_, err := hf.Open(*t)
	if err == nil {
		return
	}
	var fe *hf.FileError
	switch {
	case errors.As(err, &fe) && errors.Is(err, fs.ErrNotExist):
		c.at(field(fe.Field), "%v: relative paths are resolved against the directory of this config file", fe.Err)
	case fe != nil:
		c.at(field(fe.Field), "%v", fe.Err)
	default:
		c.at(at, "%v", err)
	}
}

// resolve returns path relative to the directory of the file where the value at sels is
// written; an absolute or empty path is returned as it is.
func (c *checker) resolve(sels []cue.Selector, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	pos := c.pos(sels)
	if !pos.IsValid() {
		return path
	}
	return filepath.Join(filepath.Dir(pos.Filename()), path)
}

func fileExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir()
}

// engineKind is the kind of the model's engines, or false when they are of both kinds.
func (c *checker) engineKind(model string) (plan.Kind, bool) {
	kind := plan.Kind("")
	for _, e := range c.fleet() {
		switch {
		case e.Model != model:
		case kind == "":
			kind = e.Kind
		case e.Kind != kind:
			return "", false
		}
	}
	if kind == "" {
		kind = plan.KindSGLang
	}
	return kind, true
}
