package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
)

// answers are engines' answers as the router checks them: SGLang's and vLLM's chat and
// completion answers, and SGLang's /generate.
var answers = []string{
	`{"id":"chatcmpl-5e22b04128a77d56","object":"chat.completion","created":1796395366,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"lorem "},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" x","logprobs":{"tokens":["x"],"token_logprobs":[-0.25],"top_logprobs":[{"x":-0.25}]},"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1,"prompt_tokens_details":null}}`,
	`{"choices":[{"message":{"content":"x\"y\\\u00e9 \ud83d\ude00\/\b\f\n\r\t","tool_calls":[]}}],"n":-1.5e3,"m":0.25E+2,"k":1e-7,"t":true,"f":false,"z":null}`,
	"{\"text\":\"é \xff\",\"meta_info\":{\"id\":\"1\",\"finish_reason\":{\"type\":\"length\",\"length\":16},\"prompt_tokens\":7,\"cached_tokens\":0,\"e2e_latency\":0.004}}",
	" \t\r\n[ 1 , [ ] , { } , \"\" ] \n",
}

// validSeeds are documents json.Valid refuses or that the byte loop leaves to it.
var validSeeds = []string{
	`[1,]`, `{"a":1,}`, `{,}`, `[,1]`, `01`, `-01`, `1.`, `.5`, `1e`, `1e+`, `-`, `+1`, `--1`, `1.5e3.`,
	"\"\x01\"", `"\q"`, `"\u12"`, `"\u12g4"`, `"abc`, `"\`, `tru`, `nul`, `truex`, `{"a" 1}`, `{"a":}`, `{1:2}`,
	`[1 2]`, `{"a":1 "b":2}`, ``, ` `, `1 2`, `{}x`, `[}`, `{]`, `]`, `}`, `,`, `:`,
	strings.Repeat("[", 64) + "1" + strings.Repeat("]", 64), strings.Repeat("[", 65) + "1" + strings.Repeat("]", 65),
	strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70),
}

// FuzzValid checks that Valid is json.Valid, and that the byte loop never takes what
// json.Valid refuses (Valid would then be wrong without a word).
func FuzzValid(f *testing.F) {
	for _, s := range append(append([]string{}, answers...), validSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := json.Valid(data)
		if got := Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", data, got, want)
		}
		if scans(data) && !want {
			t.Fatalf("the byte loop takes %q, which json.Valid refuses", data)
		}
	})
}

// The byte loop answers for the documents it is there for, engines' answers and values
// nested up to 64 deep, so that Valid is quick where it matters; deeper ones it leaves
// to json.Valid.
func TestValidTakesAnswers(t *testing.T) {
	for _, d := range append(answers, strings.Repeat("[", 64)+"1"+strings.Repeat("]", 64)) {
		if !json.Valid([]byte(d)) {
			t.Fatalf("not JSON: %.80q", d)
		}
		if !scans([]byte(d)) {
			t.Errorf("the byte loop refuses %.80q", d)
		}
	}
	deep := strings.Repeat("[", 65) + "1" + strings.Repeat("]", 65)
	if scans([]byte(deep)) || !Valid([]byte(deep)) {
		t.Errorf("65 deep: the byte loop %v, Valid %v; want false and json.Valid's true", scans([]byte(deep)), Valid([]byte(deep)))
	}
	for _, d := range validSeeds {
		if got, want := Valid([]byte(d)), json.Valid([]byte(d)); got != want {
			t.Errorf("Valid(%.40q) = %v, json.Valid %v", d, got, want)
		}
	}
}

func BenchmarkValid(b *testing.B) {
	data := []byte(answers[0])
	b.Run("json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			json.Valid(data)
		}
	})
	b.Run("strictjson", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			Valid(data)
		}
	})
}
