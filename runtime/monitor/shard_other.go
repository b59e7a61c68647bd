//go:build !linux

package monitor

import (
	"errors"
	"net/url"

	"github.com/routerkit/router/runtime/plan"
)

// shard is the poller of many engines on Linux (shard_linux.go); elsewhere every
// engine is polled by a loop of its own.
type shard struct{ size int }

func newShard(*Monitor) (*shard, error) {
	return nil, errors.New("shards of polled engines need epoll (Linux)")
}

func (*shard) add(plan.Engine, *url.URL) func() { return func() {} }
func (*shard) stop()                            {}
