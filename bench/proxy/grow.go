package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
)

// growTurns is how many turns a long_grow conversation grows by before it starts again
// from its history: its requests stay within about 20k tokens of the history's length.
const growTurns = 32

// Grow returns the kind "long_grow": the conversation of Long(prose, size), its history,
// grown by one exchange per request, so that each request is the previous one plus an
// assistant answer and a user turn of about 200 words the router has never seen. Every
// growTurns requests it starts again from the history with a new turn. Requests from
// concurrent clients take turns from the same conversation.
func Grow(prose []byte, size int) Kind {
	long := Long(prose, size)
	g := &grower{words: fields(prose)}
	end := bytes.LastIndex(long.Body, []byte(`],"model"`))
	g.history, g.tail = long.Body[:end], long.Body[end:]
	return Kind{Name: "long_grow", Body: long.Body, Next: g.next}
}

// grower makes the bodies of a long_grow kind.
type grower struct {
	mu      sync.Mutex
	history []byte // the body up to and with its last message
	tail    []byte // what follows the messages
	words   []string
	turns   []byte // the exchanges added to the history so far
	n       int    // exchanges made, numbering them
}

// next returns a new body: the previous one plus an exchange.
func (g *grower) next() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n%growTurns == 0 {
		g.turns = g.turns[:0]
	}
	g.n++
	var user bytes.Buffer
	fmt.Fprintf(&user, "Turn %d of the growing conversation. ", g.n)
	for i := range 200 {
		user.WriteString(g.words[(g.n*211+i)%len(g.words)])
		user.WriteByte(' ')
	}
	answer, _ := json.Marshal(fmt.Sprintf("Answer %d.", g.n))
	content, _ := json.Marshal(user.String())
	g.turns = fmt.Appendf(g.turns, `,{"role":"assistant","content":%s},{"role":"user","content":%s}`, answer, content)
	body := make([]byte, 0, len(g.history)+len(g.turns)+len(g.tail))
	return append(append(append(body, g.history...), g.turns...), g.tail...)
}

// fields returns the words of text.
func fields(text []byte) []string {
	var words []string
	for _, w := range bytes.Fields(text) {
		words = append(words, string(w))
	}
	return words
}
