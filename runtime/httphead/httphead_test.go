package httphead

import (
	"bufio"
	"net/http"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
)

// The header of the field lines Scan takes is textproto's reading of them, with the
// Connection field dropped on request.
func TestHeaderMatchesTextproto(t *testing.T) {
	for _, fields := range []string{
		"Host: h\r\nContent-Length: 2\r\n",
		"host: h\r\nx-a: 1\r\nX-A:  \t 2 \t\r\nx-weird_name.1: v\r\nX-Empty:\r\nX-Spaces:   \r\n",
		"Connection: close\r\nContent-Type: application/json\r\nDate: Fri, 04 Dec 2026 16:00:00 GMT\r\n",
		"",
	} {
		f, ok := Scan([]byte(fields))
		if !ok {
			t.Fatalf("Scan refused %q", fields)
		}
		want, err := textproto.NewReader(bufio.NewReader(strings.NewReader(fields + "\r\n"))).ReadMIMEHeader()
		if err != nil {
			t.Fatal(err)
		}
		if got := Header([]byte(fields), f.Lines, false); !reflect.DeepEqual(got, http.Header(want)) {
			t.Errorf("%q: Header %v, textproto %v", fields, got, want)
		}
		delete(want, "Connection")
		if got := Header([]byte(fields), f.Lines, true); !reflect.DeepEqual(got, http.Header(want)) {
			t.Errorf("%q without Connection: Header %v, want %v", fields, got, want)
		}
	}
}

// Scan reads the framing of the field lines it takes and refuses the ones net/http reads
// otherwise.
func TestScan(t *testing.T) {
	for _, tc := range []struct {
		fields string
		want   Fields
		ok     bool
	}{
		{"Host: h\r\ncontent-length: 42\r\n", Fields{Length: 42, Lines: 2}, true},
		{"Host: h\r\n", Fields{Length: -1, Lines: 1}, true},
		{"Connection: keep-alive, Close\r\nContent-Length: 0\r\n", Fields{Length: 0, Close: true, Lines: 2}, true},
		{"Connection: keep-alive\r\n", Fields{Length: -1, Lines: 1}, true},
		{"Content-Length: 1\r\nContent-Length: 1\r\n", Fields{}, false},
		{"Content-Length: -1\r\n", Fields{}, false},
		{"Content-Length: \r\n", Fields{}, false},
		{"Content-Length: 1234567890123456789\r\n", Fields{}, false},
		{"Transfer-Encoding: chunked\r\n", Fields{}, false},
		{"trailer: X\r\n", Fields{}, false},
		{"Pragma: no-cache\r\n", Fields{}, false},
		{"NoColon\r\n", Fields{}, false},
		{": empty name\r\n", Fields{}, false},
		{"X-A : space before the colon\r\n", Fields{}, false},
		{"X-A: \x7f\r\n", Fields{}, false},
	} {
		got, ok := Scan([]byte(tc.fields))
		if got != tc.want || ok != tc.ok {
			t.Errorf("Scan(%q) = %+v, %v; want %+v, %v", tc.fields, got, ok, tc.want, tc.ok)
		}
	}
}
