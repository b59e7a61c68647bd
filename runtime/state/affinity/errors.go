package affinity

import "fmt"

// BadReply is a binding store answer that is not what the router's script returns,
// which means the key prefix is shared with something else writing other values.
type BadReply struct {
	Reply []any
}

func (e *BadReply) Error() string {
	return fmt.Sprintf("binding store: unexpected script reply %v", e.Reply)
}
