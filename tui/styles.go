package tui

import (
	"image/color"

	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
)

// styles are the monitor's colours. The basic ANSI colours are used so that the marks
// read on any terminal theme and survive downsampling to 16 colours.
type styles struct {
	title, header, tab, activeTab, dim lipgloss.Style
	// Engine rows, by condition; the worst condition wins (see Engine.condition).
	down, stale, saturated lipgloss.Style
	// failed marks decisions answered with an error and buckets that answered errors.
	failed lipgloss.Style
	// banner is the disconnected line.
	banner lipgloss.Style
	help   help.Styles
}

// colourStyles are the styles on a terminal; bubbletea downsamples them to what it
// supports.
func colourStyles() styles {
	fg := func(c color.Color) lipgloss.Style { return lipgloss.NewStyle().Foreground(c) }
	return styles{
		title:     lipgloss.NewStyle().Bold(true),
		header:    lipgloss.NewStyle().Bold(true),
		tab:       fg(lipgloss.BrightBlack),
		activeTab: lipgloss.NewStyle().Bold(true).Reverse(true),
		dim:       fg(lipgloss.BrightBlack),
		down:      fg(lipgloss.Red).Bold(true),
		stale:     fg(lipgloss.BrightBlack),
		saturated: fg(lipgloss.Yellow),
		failed:    fg(lipgloss.Red),
		banner:    lipgloss.NewStyle().Foreground(lipgloss.BrightWhite).Background(lipgloss.Red).Bold(true),
		help:      help.DefaultDarkStyles(),
	}
}

// plainStyles render no escape codes at all, for `router top --once`, whose output goes
// to scripts and logs.
func plainStyles() styles {
	return styles{}
}

// condition is the style of an engine row in that condition.
func (s styles) condition(c condition) lipgloss.Style {
	switch c {
	case condDown:
		return s.down
	case condStale:
		return s.stale
	case condSaturated:
		return s.saturated
	}
	return lipgloss.Style{}
}
