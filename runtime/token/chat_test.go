package token

import (
	"encoding/json"
	"testing"
)

func TestMessageUnmarshal(t *testing.T) {
	tests := []struct {
		name, in string
		want     Message
		wantErr  bool
	}{
		{name: "string", in: `{"role":"user","content":"hi"}`, want: Message{"user", "hi"}},
		{name: "null content", in: `{"role":"assistant","content":null,"tool_calls":[]}`, want: Message{Role: "assistant"}},
		{name: "missing content", in: `{"role":"assistant"}`, want: Message{Role: "assistant"}},
		{
			name: "text parts joined, others ignored",
			in:   `{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]}`,
			want: Message{"user", "a\nb"},
		},
		{name: "number content", in: `{"role":"user","content":7}`, wantErr: true},
		{name: "bad parts", in: `{"role":"user","content":[1]}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Message
			err := json.Unmarshal([]byte(tt.in), &m)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && m != tt.want {
				t.Fatalf("got %+v, want %+v", m, tt.want)
			}
		})
	}
}
