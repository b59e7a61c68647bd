package tui

import "charm.land/bubbles/v2/key"

// keyMap is every key the monitor answers to; it also feeds the help view.
type keyMap struct {
	next, prev, jump key.Binding
	sort, reverse    key.Binding
	filter, clear    key.Binding
	pause            key.Binding
	up, down         key.Binding
	help, quit       key.Binding
}

func newKeyMap() keyMap {
	return keyMap{
		next:    key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "view")),
		prev:    key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous view")),
		jump:    key.NewBinding(key.WithKeys("1", "2", "3"), key.WithHelp("1-3", "engines, buckets, decisions")),
		sort:    key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort")),
		reverse: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reverse sort")),
		filter:  key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		clear:   key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
		pause:   key.NewBinding(key.WithKeys("p", "space"), key.WithHelp("p", "pause")),
		up:      key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "scroll up")),
		down:    key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "scroll down")),
		help:    key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		quit:    key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}

// ShortHelp is the one-line help under the table.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.next, k.sort, k.filter, k.pause, k.help, k.quit}
}

// FullHelp is the help screen, in columns.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.next, k.prev, k.jump, k.up, k.down},
		{k.sort, k.reverse, k.filter, k.clear},
		{k.pause, k.help, k.quit},
	}
}
