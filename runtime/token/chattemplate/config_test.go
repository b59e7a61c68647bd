package chattemplate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfig writes a tokenizer_config.json into a temporary folder and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokenizer_config.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Config
	}{
		{
			name: "string template and string tokens",
			body: `{"chat_template": "{{ x }}", "bos_token": "<s>", "eos_token": "</s>", "model_max_length": 4096}`,
			want: Config{ChatTemplate: "{{ x }}", BOSToken: "<s>", EOSToken: "</s>", ModelMaxLength: 4096},
		},
		{
			name: "AddedToken objects, null bos, HF no-limit sentinel",
			body: `{"chat_template": "t", "bos_token": null, "eos_token": {"__type": "AddedToken", "content": "<|im_end|>", "lstrip": false}, "model_max_length": 1000000000000000019884624838656}`,
			want: Config{ChatTemplate: "t", EOSToken: "<|im_end|>"},
		},
		{
			name: "list form with tool_use",
			body: `{"chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "rag", "template": "rag"}, {"name": "default", "template": "plain"}]}`,
			want: Config{ChatTemplate: "plain", ToolUseTemplate: "tools"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadConfig(writeConfig(t, tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLoadConfigFixtures(t *testing.T) {
	qwen, err := LoadConfig(filepath.Join(repoRoot, "testdata/tokenizers/qwen3/tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if qwen.BOSToken != "" || qwen.EOSToken != "<|im_end|>" || qwen.ModelMaxLength != 131072 || !strings.Contains(qwen.ChatTemplate, "<|im_start|>") {
		t.Errorf("qwen3: got bos %q eos %q max %d", qwen.BOSToken, qwen.EOSToken, qwen.ModelMaxLength)
	}
	llama, err := LoadConfig(filepath.Join(repoRoot, "testdata/tokenizers/llama3/tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if llama.BOSToken != "<|begin_of_text|>" || llama.EOSToken != "<|eot_id|>" || llama.ModelMaxLength != 0 {
		t.Errorf("llama3: got bos %q eos %q max %d", llama.BOSToken, llama.EOSToken, llama.ModelMaxLength)
	}
}

// TestLoadConfigSidecar reads chat_template.jinja when the config has no template, as
// transformers ≥ 4.50 saves it.
func TestLoadConfigSidecar(t *testing.T) {
	path := writeConfig(t, `{"eos_token": "</s>"}`)
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "chat_template.jinja"), []byte("{{ messages }}"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.ChatTemplate != "{{ messages }}" {
		t.Errorf("got template %q", got.ChatTemplate)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"not json", `{`, "not a tokenizer_config.json"},
		{"no template", `{"eos_token": "</s>"}`, "no chat_template, and no chat_template.jinja beside it"},
		{"template of wrong type", `{"chat_template": 3}`, `chat_template: must be a string or a list`},
		{"list without default", `{"chat_template": [{"name": "tool_use", "template": "t"}]}`, `add {"name": "default"`},
		{"token of wrong type", `{"chat_template": "t", "eos_token": 5}`, `eos_token: must be a string, null or an object with "content"`},
		{"fractional max length", `{"chat_template": "t", "model_max_length": 1.5}`, "model_max_length: must be a non-negative integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.body)
			_, err := LoadConfig(path)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %s and say %q", err, path, tt.want)
			}
		})
	}
}
