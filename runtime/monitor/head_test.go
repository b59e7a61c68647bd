package monitor

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"
)

// readOutcome is what reading one response from some bytes gave, body and what follows
// included, as a poll reads it.
type readOutcome struct {
	status int
	close  bool
	gzip   bool
	body   string
	rest   string // the bytes after the response, where the next one would start
	err    error
}

// readOurs reads with readHead, readStandard with http.ReadResponse.
func readOurs(data []byte) readOutcome {
	br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
	h, err := readHead(br)
	if err != nil {
		return readOutcome{err: err}
	}
	body, err := io.ReadAll(h.body(br))
	if err == nil {
		err = h.trailer(br)
	}
	rest, _ := io.ReadAll(br)
	return readOutcome{status: h.status, close: h.close, gzip: h.gzip, body: string(body), rest: string(rest), err: err}
}

func readStandard(data []byte) readOutcome {
	br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return readOutcome{err: err}
	}
	body, err := io.ReadAll(resp.Body)
	rest, _ := io.ReadAll(br)
	return readOutcome{status: resp.StatusCode, close: resp.Close, gzip: resp.Header.Get("Content-Encoding") == "gzip",
		body: string(body), rest: string(rest), err: err}
}

var headSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Thu, 03 Dec 2026 22:00:00 GMT\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\n, w\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\nnext",
	"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\nConnection: keep-alive, close\r\ncontent-length: 0\r\n\r\n",
	"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 13\r\n\r\nshutting down",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\n\r\nread to the end",
	"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n folded\r\n\r\nok",
	// uvicorn's answer to /v1/loads (SGLang's HTTP server).
	"HTTP/1.1 200 OK\r\ndate: Thu, 03 Dec 2026 22:00:00 GMT\r\nserver: uvicorn\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}",
}

// TestHeadAgreesWithReadResponse: on answers as engines send them (Go's net/http,
// uvicorn) and on the corners of framing, readHead and http.ReadResponse accept and
// refuse the same, and read the same status, body, connection fate and coding, leaving
// the same bytes for the next answer.
func TestHeadAgreesWithReadResponse(t *testing.T) {
	for _, s := range headSeeds {
		ours, std := readOurs([]byte(s)), readStandard([]byte(s))
		if (ours.err == nil) != (std.err == nil) {
			t.Errorf("%q: readHead error %v, net/http error %v", s, ours.err, std.err)
			continue
		}
		if ours.err == nil && ours != std {
			t.Errorf("%q:\nreadHead      %+v\nReadResponse  %+v", s, ours, std)
		}
	}
}

// FuzzReadHead holds readHead to http.ReadResponse: what it accepts, net/http accepts and
// reads the same way; it may refuse more.
func FuzzReadHead(f *testing.F) {
	for _, s := range headSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ours := readOurs(data)
		if ours.err != nil {
			return
		}
		std := readStandard(data)
		if std.err != nil {
			t.Fatalf("readHead accepts what net/http refuses (%v): %+v", std.err, ours)
		}
		if ours != std {
			t.Fatalf("\nreadHead      %+v\nReadResponse  %+v", ours, std)
		}
	})
}

// BenchmarkReadAnswer reads the simulator's answer to /v1/loads (as Go's net/http server
// frames it) with readHead and with http.ReadResponse, body included, side by side.
func BenchmarkReadAnswer(b *testing.B) {
	body := `{"loads":[{"dp_rank":0,"timestamp":1796339876.5076938,"num_running_reqs":0,"num_waiting_reqs":0,"num_waiting_uncached_tokens":0,"num_used_tokens":0,"num_total_tokens":0,"max_total_num_tokens":131072,"max_running_requests":32}]}`
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Thu, 03 Dec 2026 23:17:56 GMT\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	var src bytes.Reader
	br := bufio.NewReaderSize(&src, 4096)
	var buf bytes.Buffer
	b.Run("readHead", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			src.Reset(answer)
			br.Reset(&src)
			h, err := readHead(br)
			if err != nil {
				b.Fatal(err)
			}
			if out, err := readBody(&buf, "", h.status, h.reason, h.length, h.body(br)); err != nil || len(out) != len(body) {
				b.Fatalf("body %q, %v", out, err)
			}
		}
	})
	b.Run("ReadResponse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			src.Reset(answer)
			br.Reset(&src)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				b.Fatal(err)
			}
			if out, err := readBody(&buf, "", resp.StatusCode, "", resp.ContentLength, resp.Body); err != nil || len(out) != len(body) {
				b.Fatalf("body %q, %v", out, err)
			}
			resp.Body.Close()
		}
	})
}
