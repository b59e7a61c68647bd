package strictjson

import (
	"runtime"
	"testing"
)

// decoder is one way to decode a chat body, for BenchmarkDecoders.
type decoder struct {
	name   string
	decode func(body []byte) error
}

// decoders are strictjson's entry points; v2_bench_test.go adds encoding/json/v2's when
// built with GOEXPERIMENT=jsonv2.
var decoders = []decoder{
	{"Parse", func(body []byte) error { _, err := Parse(body, (*chatLike)(nil)); return err }},
	{"Unmarshal", func(body []byte) error { return Unmarshal(body, new(chatLike)) }},
}

// BenchmarkDecoders decodes each shape of TestAllocationPerByte, read and ignored, with
// each decoder, and reports the bytes allocated per byte of body (B/byte) beside the
// time. The weighing of encoding/json/v2 against strictjson in the package doc is its
// output:
//
//	GOEXPERIMENT=jsonv2 go test -run '^$' -bench Decoders -benchmem ./runtime/strictjson
func BenchmarkDecoders(b *testing.B) {
	const n = 256 << 10
	for _, s := range bodyShapes {
		value := s.make(n)
		for _, place := range []struct{ name, body string }{
			{"ignored", `{"model":"m","messages":[{"role":"user","content":"hi"}],"x":` + value + `}`},
			{"read", `{"model":"m","messages":[{"role":"user","content":"hi","x":` + value + `}]}`},
		} {
			body := []byte(place.body)
			for _, d := range decoders {
				b.Run(s.name+"/"+place.name+"/"+d.name, func(b *testing.B) {
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					for b.Loop() {
						if err := d.decode(body); err != nil {
							b.Fatal(err)
						}
					}
					runtime.ReadMemStats(&after)
					b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(body)), "B/byte")
				})
			}
		}
	}
}
