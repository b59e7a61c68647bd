// Package proc ends the child processes the benchmark programs start (routers, proxies,
// external engines), so a stuck one cannot outlive its run.
package proc

import (
	"os/exec"
	"syscall"
	"time"
)

// Stop asks cmd's process to end (SIGTERM), waits for it up to grace, then kills it.
func Stop(cmd *exec.Cmd, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}
