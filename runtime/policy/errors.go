package policy

import (
	"fmt"
	"strings"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// The outcomes below are the failures of docs/design.md, Policies. The bucket loop branches
// on them with errors.As: NoCandidates, NoAdmissibleEngine and AdmissionRejected advance to
// the next bucket; InvalidSignal, InvalidConfiguration and OutsideCandidates stop routing.

// NoCandidates means the group had no eligible engine for the stage.
type NoCandidates struct {
	Stage plan.Role
	// Why, when set, says why healthy members were not eligible, e.g. none can receive
	// the KV cache of the chosen prefill engine.
	Why string
}

func (e *NoCandidates) Error() string {
	if e.Why != "" {
		return fmt.Sprintf("no eligible %s engine: %s", e.Stage, e.Why)
	}
	return fmt.Sprintf("no eligible %s engine", e.Stage)
}

// AdmissionRejected means the engine the policy chose failed one of its admission caps.
type AdmissionRejected struct {
	Engine *engine.Worker
	Stage  plan.Role
	// Limit is the cap's configuration name, e.g. "max_running_requests".
	Limit string
	// Value is the engine's metric, which was not below Cap.
	Value int64
	Cap   int64
}

func (e *AdmissionRejected) Error() string {
	return fmt.Sprintf("%s engine %s rejected by admission: %s is %d, cap %d",
		e.Stage, e.Engine.ID(), limitMetric[e.Limit], e.Value, e.Cap)
}

// NoAdmissibleEngine means a policy that considers several engines found none that passed
// admission. Rejections holds each engine's rejection.
type NoAdmissibleEngine struct {
	Stage      plan.Role
	Rejections []*AdmissionRejected
}

func (e *NoAdmissibleEngine) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no admissible %s engine", e.Stage)
	for i, r := range e.Rejections {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		b.WriteString(sep)
		b.WriteString(r.Error())
	}
	return b.String()
}

// InvalidSignal means the request's routing facts are inconsistent, such as an expected
// peak below the input length.
type InvalidSignal struct {
	Msg string
}

func (e *InvalidSignal) Error() string { return "invalid routing signal: " + e.Msg }

// InvalidConfiguration means a policy cannot be built or run as configured.
type InvalidConfiguration struct {
	Msg string
}

func (e *InvalidConfiguration) Error() string { return "invalid policy configuration: " + e.Msg }

// OutsideCandidates means a policy returned an engine that is not one of the exact
// candidate pointers it was given, including a re-registered worker with the same id.
type OutsideCandidates struct {
	Stage  plan.Role
	Engine *engine.Worker // nil when the policy returned no engine at all
}

func (e *OutsideCandidates) Error() string {
	if e.Engine == nil {
		return fmt.Sprintf("%s policy returned no engine and no error", e.Stage)
	}
	return fmt.Sprintf("%s policy returned engine %s, which is not one of its candidates", e.Stage, e.Engine.ID())
}
