package policy

import "context"

type dryRunKey struct{}

// WithDryRun returns a context marking selection as a dry run, as `router explain` and the
// server's explain endpoint run it: policies select exactly as serving would, reading the
// same shared state, but write no affinity binding and refresh none, so explaining a
// request never changes where later requests go.
func WithDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunKey{}, true)
}

// DryRun reports whether ctx marks a dry run.
func DryRun(ctx context.Context) bool {
	dry, _ := ctx.Value(dryRunKey{}).(bool)
	return dry
}
