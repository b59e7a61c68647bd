package tui

import (
	"context"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// Options configure a Model.
type Options struct {
	// Fetch returns the router's snapshot; HTTPFetch is the real one.
	Fetch FetchFunc
	// Source names the router in the title, usually its URL.
	Source string
	// Interval is the time between polls; 1s when zero.
	Interval time.Duration
	// Now is the clock that timestamps polls; time.Now when nil. Rates and the load
	// history use the router's own snapshot time when it sends one.
	Now func() time.Time
}

const (
	defaultInterval = time.Second
	// maxRetry caps the back-off between polls while the router is unreachable.
	maxRetry = 10 * time.Second
)

// view is one of the monitor's screens, switched with tab.
type view int

const (
	viewEngines view = iota
	viewBuckets
	viewDecisions
	numViews
)

var viewNames = [numViews]string{"engines", "buckets", "decisions"}

// Model is the monitor. It is a value: Update returns the next model and never blocks;
// polling happens in commands that report back with messages.
type Model struct {
	opts   Options
	keys   keyMap
	help   help.Model
	styles styles

	width, height int

	view     view
	sortBy   [numViews]int  // index into the view's sort keys
	reversed [numViews]bool // the user flipped the key's natural direction
	filter   string
	once     bool // rendering for --once: plain text without the sort marker
	editing  bool // typing a filter
	offset   int  // first table row shown, for scrolling
	paused   bool

	// gen numbers the poll loop: pausing and resuming start a new loop, and messages
	// from an older one are dropped, so there is never more than one loop running.
	gen int

	snap   *snapshot // nil until the first successful poll
	err    error     // why the last poll failed; nil while connected
	fails  int       // consecutive failed polls
	retry  time.Duration
	errAge time.Duration // age of snap when the last poll failed
}

// pollMsg asks for the next poll of loop gen.
type pollMsg struct{ gen int }

// resultMsg is the outcome of one poll of loop gen, timestamped with the model's clock.
type resultMsg struct {
	gen   int
	state *State
	err   error
	at    time.Time
}

// New returns a monitor that polls o.Fetch.
func New(o Options) Model {
	if o.Interval <= 0 {
		o.Interval = defaultInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	st := colourStyles()
	h := help.New()
	h.Styles = st.help
	return Model{opts: o, keys: newKeyMap(), help: h, styles: st}
}

// Init starts polling.
func (m Model) Init() tea.Cmd { return m.poll() }

// poll fetches one snapshot for the current loop.
func (m Model) poll() tea.Cmd {
	gen, fetch, now := m.gen, m.opts.Fetch, m.opts.Now
	return func() tea.Msg {
		st, err := fetch.bounded(context.Background())
		return resultMsg{gen: gen, state: st, err: err, at: now()}
	}
}

// after schedules the next poll of the current loop.
func (m Model) after(d time.Duration) tea.Cmd {
	gen := m.gen
	return tea.Tick(d, func(time.Time) tea.Msg { return pollMsg{gen: gen} })
}

// Update handles a message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.SetWidth(msg.Width)
	case pollMsg:
		if msg.gen == m.gen && !m.paused {
			return m, m.poll()
		}
	case resultMsg:
		if msg.gen != m.gen || m.paused {
			return m, nil
		}
		if msg.err != nil {
			m.fails++
			m.err, m.retry = msg.err, backoff(m.opts.Interval, m.fails)
			if m.snap != nil {
				m.errAge = msg.at.Sub(m.snap.polled)
			}
			return m, m.after(m.retry)
		}
		m.err, m.fails = nil, 0
		m.snap = m.snap.next(msg.state, msg.at)
		return m, m.after(m.opts.Interval)
	case tea.KeyPressMsg:
		if m.editing {
			return m.editFilter(msg)
		}
		return m.handleKey(msg)
	}
	return m, nil
}

// backoff is the wait before retry number n (1-based) of a failing router: the poll
// interval, doubling with each failure, at most maxRetry (but never under the interval).
func backoff(interval time.Duration, n int) time.Duration {
	d := interval
	for i := 1; i < n && d < maxRetry; i++ {
		d *= 2
	}
	return max(min(d, maxRetry), interval)
}

func (m Model) handleKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch k := m.keys; {
	case key.Matches(msg, k.quit):
		return m, tea.Quit
	case key.Matches(msg, k.next):
		m.view, m.offset = (m.view+1)%numViews, 0
	case key.Matches(msg, k.prev):
		m.view, m.offset = (m.view+numViews-1)%numViews, 0
	case key.Matches(msg, k.jump):
		m.view, m.offset = view(msg.String()[0]-'1'), 0
	case key.Matches(msg, k.sort):
		if n := numSorts[m.view]; n > 0 {
			m.sortBy[m.view] = (m.sortBy[m.view] + 1) % n
			m.reversed[m.view] = false
		}
	case key.Matches(msg, k.reverse):
		m.reversed[m.view] = !m.reversed[m.view]
	case key.Matches(msg, k.filter):
		m.editing = true
	case key.Matches(msg, k.clear):
		m.filter, m.offset = "", 0
	case key.Matches(msg, k.pause):
		// Either way the running loop is abandoned; resuming starts a fresh one at once.
		m.paused = !m.paused
		m.gen++
		if !m.paused {
			return m, m.poll()
		}
	case key.Matches(msg, k.up):
		m.offset = max(m.offset-1, 0)
	case key.Matches(msg, k.down):
		m.offset++ // View clamps it to the rows there are
	case key.Matches(msg, k.help):
		// The help screen scrolls with the same offset as the tables: each opens at its top.
		m.help.ShowAll, m.offset = !m.help.ShowAll, 0
	}
	return m, nil
}

// editFilter handles keys while the filter is being typed; the rows narrow as it grows.
func (m Model) editFilter(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch msg.String() {
	case "ctrl+c":
		return m, tea.Quit
	case "enter":
		m.editing = false
	case "esc":
		m.editing, m.filter = false, ""
	case "backspace":
		if r := []rune(m.filter); len(r) > 0 {
			m.filter = string(r[:len(r)-1])
		}
	default:
		m.filter += msg.Text
	}
	m.offset = 0
	return m, nil
}
