package main

import (
	"errors"
	"fmt"
	"testing"

	tea "charm.land/bubbletea/v2"
)

func TestMonitorExit(t *testing.T) {
	if err := monitorExit(nil); err != nil {
		t.Errorf("q: %v, want a clean exit", err)
	}
	if err := monitorExit(fmt.Errorf("run: %w", tea.ErrInterrupted)); err != nil {
		t.Errorf("Ctrl+C (SIGINT): %v, want a clean exit like q", err)
	}
	if err := monitorExit(tea.ErrProgramKilled); err == nil || !errors.Is(err, tea.ErrProgramKilled) {
		t.Errorf("a killed program: %v, want the error", err)
	}
}
