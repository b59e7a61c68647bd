package strictjson

import (
	"encoding/json"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// chatLike is runtime/server's chatRequest as the decoder sees it: the fields the router
// reads, json.RawMessage for what it forwards or renders (messages, tools, template
// arguments), and an embedded struct of sampling parameters.
type chatLike struct {
	Model     *string         `json:"model"`
	Messages  json.RawMessage `json:"messages"`
	Tools     json.RawMessage `json:"tools"`
	Kwargs    json.RawMessage `json:"chat_template_kwargs"`
	Stream    bool            `json:"stream"`
	MaxTokens *int64          `json:"max_tokens"`
	embedded
}

// shapedMessage decodes itself, as token.Message does; its registered shape is the keys
// token.Message reads.
type shapedMessage struct{ selfDecoding }

func init() {
	RegisterShape[shapedMessage, struct {
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}]()
}

// bodyShapes are JSON values of about n bytes each, of the forms that cost a decoder most
// per byte.
var bodyShapes = []struct {
	name string
	make func(n int) string
}{
	{"long string", func(n int) string { return `"` + strings.Repeat("a", n) + `"` }},
	{"escaped string", func(n int) string { return `"` + strings.Repeat(`\n`, n/2) + `"` }},
	{"number array", func(n int) string { return "[" + strings.Repeat("0,", n/2) + "0]" }},
	{"deep objects", func(n int) string {
		deep := strings.Repeat(`{"a":`, 500) + "0" + strings.Repeat("}", 500)
		return "[" + strings.Repeat(deep+",", n/len(deep)) + "0]"
	}},
	{"many keys", func(n int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := 0; b.Len() < n; i++ {
			b.WriteString(`"k` + strconv.Itoa(i) + `":0,`)
		}
		b.WriteString(`"end":0}`)
		return b.String()
	}},
	{"nested arrays", func(n int) string { return "[" + strings.Repeat("[[0]],", n/6) + "[]]" }},
	{"empty arrays", func(n int) string { return "[" + strings.Repeat("[],", n/3) + "[]]" }},
	{"small objects", func(n int) string { return "[" + strings.Repeat(`{"a":0},`, n/8) + "{}]" }},
}

// The memory Parse and Unmarshal may allocate per byte of a body, whatever its shape,
// beyond a fixed allowance (the parser's pooled stacks, grown afresh after a collection
// emptied the pool, and the schema): a value that is built costs at most a Value (88
// bytes) per two bytes and its container's size entry; an ignored one, skipped, only the
// one copy of the body Parse makes and, for an object of many keys, the set that finds
// their repeats.
const (
	builtPerByte     = 64
	skippedPerByte   = 10
	unmarshalPerByte = 10
	fixedAllowance   = 1 << 20
)

// allocated is the bytes f allocates: the least of three calls, since the count is the
// process's and another goroutine (a fuzzing worker's) may allocate meanwhile.
func allocated(f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// decodeCosts is the bytes allocated by Parse and by Unmarshal of body read as a chat
// request, as runtime/server reads one: the tree of the whole body, and the messages'
// keys checked against their registered shape.
func decodeCosts(t testing.TB, body []byte) (parse, unmarshal uint64) {
	t.Helper()
	decode := func() {
		v, err := Parse(body, (*chatLike)(nil))
		if err != nil {
			t.Fatal(err)
		}
		if m := v.Get("messages"); m == nil || !m.KeysMatch((*[]shapedMessage)(nil)) {
			t.Fatalf("messages not read: %v", m)
		}
	}
	decode() // the schemas are built once, on the first decode of a type
	parse = allocated(decode)
	unmarshal = allocated(func() {
		var req chatLike
		if err := Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
	})
	return parse, unmarshal
}

// checkCost fails t when what was allocated for a body of n bytes exceeds perByte a
// byte beyond the fixed allowance.
func checkCost(t *testing.T, what string, allocated uint64, n, perByte int) {
	t.Helper()
	if allocated > uint64(perByte*n+fixedAllowance) {
		t.Errorf("%s: %d bytes allocated for %d bytes (%.1f a byte), want at most %d a byte and %d",
			what, allocated, n, float64(allocated)/float64(n), perByte, fixedAllowance)
	}
}

// Every shape costs at most a constant a byte: built where the router reads it (inside a
// message, whose keys all reach the chat template), skipped where it ignores it.
//
//	go test -run AllocationPerByte -v ./runtime/strictjson
func TestAllocationPerByte(t *testing.T) {
	const n = 256 << 10
	for _, s := range bodyShapes {
		value := s.make(n)
		ignored := `{"model":"m","messages":[{"role":"user","content":"hi"}],"x":` + value + `}`
		read := `{"model":"m","messages":[{"role":"user","content":"hi","x":` + value + `}]}`
		ip, iu := decodeCosts(t, []byte(ignored))
		rp, ru := decodeCosts(t, []byte(read))
		per := func(b uint64) float64 { return float64(b) / float64(len(ignored)) }
		t.Logf("%-15s ignored: Parse %6.2f Unmarshal %5.2f   read: Parse %6.2f Unmarshal %5.2f bytes a byte",
			s.name, per(ip), per(iu), per(rp), per(ru))
		checkCost(t, s.name+" ignored, Parse", ip, len(ignored), skippedPerByte)
		checkCost(t, s.name+" ignored, Unmarshal", iu, len(ignored), unmarshalPerByte)
		checkCost(t, s.name+" read, Parse", rp, len(read), builtPerByte)
		checkCost(t, s.name+" read, Unmarshal", ru, len(read), unmarshalPerByte)
	}
}

// Issue 25's reproduction: a 7.6 MiB chat body whose ignored field holds 4M zeros took a
// router from 27 MB to 1.28 GB. Decoding it now costs about its copy.
func TestIgnoredZerosCostTheirCopy(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"x":[` + strings.Repeat("0,", 4<<20-1) + `0]}`)
	parse, unmarshal := decodeCosts(t, body)
	t.Logf("%d bytes: Parse allocated %d, Unmarshal %d", len(body), parse, unmarshal)
	checkCost(t, "Parse", parse, len(body), 2)
	checkCost(t, "Unmarshal", unmarshal, len(body), 2)
}

// FuzzAllocationPerByte checks the bounds of TestAllocationPerByte on any body, valid or
// not: Parse with every container sized (the regime of large documents) within a small
// allowance, Parse itself, Unmarshal and Check within the fixed one, which also holds
// what grows with nesting (encoding/json's scanner, the path to an error), at most 10000
// levels.
func FuzzAllocationPerByte(f *testing.F) {
	for _, s := range bodyShapes {
		value := s.make(4 << 10)
		f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi","x":` + value + `}],"x":` + value + `}`))
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"x":[` + strings.Repeat("0,", 3000) + `0]}`))
	f.Add([]byte(strings.Repeat("[", 5000) + strings.Repeat("]", 5000)))
	f.Add([]byte(`{"x":` + strings.Repeat(`{"a":[0,"\u00e9",`, 500) + strings.Repeat("]}", 500) + `,"x":1}`))
	f.Add([]byte(`{"messages":` + strings.Repeat("[", 9990) + `{"a":1,"a":1}` + strings.Repeat("]", 9990) + "}"))
	const smallAllowance = 64 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		sized := func() { _, _ = parse(data, (*chatLike)(nil), 0, nil) }
		sized() // the schema is built on the first decode of its type
		if got := allocated(sized); got > uint64(builtPerByte*len(data)+smallAllowance) {
			t.Fatalf("Parse with sizes allocated %d bytes for %d (%.1f a byte)", got, len(data), float64(got)/float64(len(data)))
		}
		if got := allocated(func() { _, _ = Parse(data, (*chatLike)(nil)) }); got > uint64(builtPerByte*len(data)+fixedAllowance) {
			t.Fatalf("Parse allocated %d bytes for %d (%.1f a byte)", got, len(data), float64(got)/float64(len(data)))
		}
		if got := allocated(func() { _ = Unmarshal(data, new(chatLike)) }); got > uint64(unmarshalPerByte*len(data)+fixedAllowance) {
			t.Fatalf("Unmarshal allocated %d bytes for %d (%.1f a byte)", got, len(data), float64(got)/float64(len(data)))
		}
		if got := allocated(func() { _ = Check(data, (*chatLike)(nil)) }); got > uint64(unmarshalPerByte*len(data)+fixedAllowance) {
			t.Fatalf("Check allocated %d bytes for %d (%.1f a byte)", got, len(data), float64(got)/float64(len(data)))
		}
	})
}
