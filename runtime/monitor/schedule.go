package monitor

import (
	"time"
)

// confirmFactor is how many health intervals pass between /health probes of an engine
// whose load polls succeed. A successful load poll already shows the engine's HTTP
// server and scheduler alive, so /health is needed only for what a load report cannot
// say: SGLang answers /health with 503 while it starts and while it drains
// (python/sglang/srt/entrypoints/http_server.py, health_generate: gracefully_exit or
// ServerStatus.Starting) yet keeps serving /v1/loads from the snapshots its schedulers
// publish (python/sglang/srt/managers/load_snapshot.py, which has no draining field),
// and vLLM answers /health with 503 while paused or draining
// (vllm/entrypoints/serve/instrumentator/health.py) while /metrics keeps answering. The
// slower probe finds such an engine within confirmFactor health intervals; from its
// first failed probe the engine is probed every health interval and its load polls stop
// counting, so it leaves rotation after failure_threshold probes as before.
const confirmFactor = 5

// jitter is the fraction by which each wait is varied up or down, so engines whose
// first polls were spread stay spread instead of drifting back into step.
const jitter = 0.1

// maxWakeSlot is the coarsest grain of poll times. A loop sleeps until the end of the
// slot its next poll falls in, so the loops due in one slot wake together: the process
// wakes at most once a slot however many engines it polls, instead of once per poll.
// Each wake-up of an otherwise idle Go process costs about as much as a poll (the
// scheduler and sysmon waking threads), so at 512 engines spreading polls without slots
// spent as much CPU waking as polling (docs/benchmarks.md, "Fleet polling").
const maxWakeSlot = 50 * time.Millisecond

// wakeSlot is the grain for an engine polled every loadEvery (0: not polled) and probed
// every healthEvery: a tenth of the shorter, at most maxWakeSlot, so a poll is at most a
// tenth of its interval late and polls stay spread over ten slots or more.
func wakeSlot(loadEvery, healthEvery time.Duration) time.Duration {
	d := healthEvery
	if loadEvery > 0 {
		d = min(d, loadEvery)
	}
	return max(min(d/10, maxWakeSlot), time.Millisecond)
}

// alignUp returns the end of the slot that t falls in. Slots are counted from a fixed
// origin, so every loop with the same slot shares its boundaries.
func alignUp(t time.Time, slot time.Duration) time.Time {
	a := t.Truncate(slot)
	if a.Before(t) {
		a = a.Add(slot)
	}
	return a
}

// schedule decides, for one engine, when to poll its load and when to probe its
// /health, and whether a load poll counts as a health check. It does no I/O and reads
// no clock, so its rules are tested without servers or sleeps.
type schedule struct {
	loadEvery   time.Duration // 0: the engine's load is not polled
	healthEvery time.Duration
	rnd         func() float64 // uniform in [0, 1)

	nextLoad, nextProbe time.Time
	// probeOK: the last /health probe succeeded. loadOK: the last load poll did. A load
	// poll counts as a health check only while both hold.
	probeOK, loadOK bool
}

func newSchedule(loadEvery, healthEvery time.Duration, rnd func() float64) *schedule {
	return &schedule{loadEvery: loadEvery, healthEvery: healthEvery, rnd: rnd, loadOK: true}
}

// start places the first poll and the first probe at random phases within their
// intervals, so a fleet started (or reloaded) at once is not polled in one burst. The
// first probe comes within one health interval: until an engine has answered /health,
// its load polls do not count.
func (s *schedule) start(now time.Time) {
	s.nextProbe = now.Add(time.Duration(s.rnd() * float64(s.healthEvery)))
	if s.loadEvery > 0 {
		s.nextLoad = now.Add(time.Duration(s.rnd() * float64(s.loadEvery)))
	}
}

// trusted reports whether load polls stand in for health probes.
func (s *schedule) trusted() bool { return s.loadEvery > 0 && s.probeOK && s.loadOK }

// probeInterval is the wait after a probe: long while load polls stand in for it.
func (s *schedule) probeInterval() time.Duration {
	if s.trusted() {
		return confirmFactor * s.healthEvery
	}
	return s.healthEvery
}

// wake is when something is next due.
func (s *schedule) wake() time.Time {
	if s.loadEvery > 0 && s.nextLoad.Before(s.nextProbe) {
		return s.nextLoad
	}
	return s.nextProbe
}

// loadDue and probeDue report what is due at now.
func (s *schedule) loadDue(now time.Time) bool  { return s.loadEvery > 0 && !now.Before(s.nextLoad) }
func (s *schedule) probeDue(now time.Time) bool { return !now.Before(s.nextProbe) }

// loaded records a load poll's outcome and reports whether it counts as a successful
// health check. A failed poll of an engine whose polls stood in for its probes makes
// the probe due at once: the engine's health is unknown until /health answers.
func (s *schedule) loaded(now time.Time, ok bool) (countsAsHealth bool) {
	wasTrusted := s.trusted()
	s.loadOK = ok
	s.nextLoad = now.Add(s.jittered(s.loadEvery))
	if !ok && wasTrusted {
		s.nextProbe = now
	}
	return ok && wasTrusted
}

// probed records a /health probe's outcome.
func (s *schedule) probed(now time.Time, ok bool) {
	s.probeOK = ok
	s.nextProbe = now.Add(s.jittered(s.probeInterval()))
}

func (s *schedule) jittered(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 - jitter + 2*jitter*s.rnd()))
}
