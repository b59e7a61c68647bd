//go:build goexperiment.jsonv2

package strictjson

import (
	"bytes"
	"encoding/json/jsontext"
	jsonv2 "encoding/json/v2"
	"io"
)

// encoding/json/v2 on BenchmarkDecoders' bodies: into the chat request (its defaults
// refuse duplicate names and match names case-sensitively), into an any (the nearest it
// has to Parse's tree), and its tokenizer alone (what a tree built on it would start from).
func init() {
	decoders = append(decoders,
		decoder{"v2.Unmarshal", func(body []byte) error { return jsonv2.Unmarshal(body, new(chatLike)) }},
		decoder{"v2.Unmarshal-any", func(body []byte) error { var x any; return jsonv2.Unmarshal(body, &x) }},
		decoder{"v2.tokens", func(body []byte) error {
			dec := jsontext.NewDecoder(bytes.NewReader(body))
			for {
				if _, err := dec.ReadToken(); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
			}
		}},
	)
}
