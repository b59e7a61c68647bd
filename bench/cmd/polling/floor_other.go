//go:build !linux

package main

import (
	"errors"
	"time"
)

const floorEnv = "BENCH_POLLING_FLOOR"

func floorChild(time.Duration, time.Duration) error {
	return errors.New("the floor poller is written for Linux's epoll")
}
