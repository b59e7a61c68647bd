package quality

import (
	"context"
	"fmt"

	"github.com/routerkit/router/runtime/sim"
	"github.com/routerkit/router/runtime/state/affinity/redistest"
)

// ReplicasWorkload is the name of the three-replica workload: the multi_turn
// conversations sent through a round-robin load balancer to three routers over one fleet
// and one redis-server, so that consecutive turns of a conversation reach different
// replicas. It measures whether cache affinity survives several routers (docs/serve.md,
// "Running several routers").
const ReplicasWorkload = "three_replicas"

// ReplicaSetup is one routing setup of the three-replica workload.
type ReplicaSetup struct {
	Policy
	Replicas int
}

// ReplicaSetups are the setups the three-replica workload compares: the approximate
// prefix source with one router (the reference: every turn reaches the router that
// learned its conversation), with three routers each learning alone (today's default
// without KV events), with three sharing it through the store, and session_aware with
// bindings in the store, which keeps conversations by their session header instead of
// their prompt.
var ReplicaSetups = []ReplicaSetup{
	{Policy{Name: "cache_aware/approximate ×1", YAML: "{type: cache_aware, prefix_source: {type: approximate}}"}, 1},
	{Policy{Name: "cache_aware/approximate ×3", YAML: "{type: cache_aware, prefix_source: {type: approximate}}"}, 3},
	{Policy{Name: "cache_aware/approximate+store ×3", YAML: "{type: cache_aware, prefix_source: {type: approximate, share: store}}"}, 3},
	{Policy{Name: "session_aware+store ×3", YAML: "{type: session_aware}"}, 3},
}

// RunReplicas measures every setup of the three-replica workload, each on a fresh fleet
// and a fresh redis-server (which must be installed: `make redis`).
func RunReplicas(ctx context.Context, o Options) ([]Row, error) {
	cfg := EngineConfig(o.TimeScale)
	seed := o.Seed + uint64(len(Workloads))
	base, err := Generate("multi_turn", o.Shape, seed)
	if err != nil {
		return nil, err
	}
	rate := Rate(base, cfg, o.Engines, o.Utilisation)
	Schedule(base, rate, seed)
	var rows []Row
	for _, s := range ReplicaSetups {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		row, counts, err := runReplicaSetup(ctx, s, o.Engines, cfg, base)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", s.Name, err)
		}
		rows = append(rows, row)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%-16s %-24s %5.1f req/s offered, %3d errors, TTFT p90 %s ms, hit %.0f%%, busiest %.2f %v\n",
				ReplicasWorkload, s.Name, rate, row.Errors, ms(row.TTFT[1]), 100*row.HitRate, row.Busiest, counts)
		}
	}
	return rows, nil
}

func runReplicaSetup(ctx context.Context, s ReplicaSetup, engines int, cfg sim.Config, base []Request) (Row, []int, error) {
	redis, err := redistest.Run(0)
	if err != nil {
		return Row{}, nil, err
	}
	defer redis.Stop()
	yaml := fmt.Sprintf("bindings: {store: redis, address: %q}\n%s", redis.Addr(), config(s.Policy, engines))
	f, err := startFleet(ctx, s.Name, []byte(yaml), s.Replicas, func(string) sim.Config { return cfg })
	if err != nil {
		return Row{}, nil, err
	}
	client := newClient()
	outs := Send(ctx, client, f.URL, append([]Request(nil), base...))
	counts, err := f.EngineRequests()
	client.CloseIdleConnections()
	f.Close()
	if err != nil {
		return Row{}, nil, err
	}
	row := Summarize(ReplicasWorkload, s.Name, outs)
	row.Busiest = busiestShare(counts)
	return row, counts, nil
}
