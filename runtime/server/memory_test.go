package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func largeChat(size int) []byte {
	return []byte(chat("m", strings.Repeat("word ", size/5), `, "max_tokens": 4`))
}

// Defect 7: the body is read once into one buffer of its declared size (the PD bootstrap
// fields are added without copying it: see dispatch's TestBootstrapMemory).
func TestRequestBodyMemory(t *testing.T) {
	srv, err := New(plainPlan("E1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := largeChat(8 << 20)
	var got []byte
	read := allocated(func() {
		r, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		got, _ = srv.current().ReadBody(httptest.NewRecorder(), r)
	})
	if !bytes.Equal(got, body) {
		t.Fatal("the body read differs from the one sent")
	}
	if limit := uint64(len(body)) + preallocMax + 64<<10; read > limit {
		t.Errorf("reading a %d-byte body allocated %d bytes, want at most %d", len(body), read, limit)
	}
	// A client declaring a large body it does not send gets no large buffer.
	lying := allocated(func() {
		r, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader("{}"))
		r.ContentLength = 30 << 20
		_, _ = srv.current().ReadBody(httptest.NewRecorder(), r)
	})
	if lying > preallocMax+64<<10 {
		t.Errorf("a declared but unsent 30 MiB body allocated %d bytes", lying)
	}
}

// BenchmarkPrepareLargeBody measures reading, strict decoding and tokenizing a 30 MiB
// chat request (bytes/op is the per-request memory).
func BenchmarkPrepareLargeBody(b *testing.B) {
	srv, err := New(plainPlan("E1"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	body := largeChat(30 << 20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		if _, err := srv.current().prepare(httptest.NewRecorder(), r, srv.current().models.Chat); err != nil {
			b.Fatal(err)
		}
	}
}
