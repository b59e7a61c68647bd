package engine

import (
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

func worker(id string, role plan.Role) *Worker {
	return New(plan.Engine{ID: id, URL: "http://" + id, Model: "m", Role: role})
}

func ids(ws []*Worker) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID()
	}
	return out
}

func TestRegistryWorkersSortedByModelAndRole(t *testing.T) {
	other := New(plan.Engine{ID: "A0", Model: "other", Role: plan.RoleDecode})
	r, err := NewRegistry(worker("D2", plan.RoleDecode), worker("P1", plan.RolePrefill), worker("D10", plan.RoleDecode), worker("D1", plan.RoleDecode), other)
	if err != nil {
		t.Fatal(err)
	}
	got := ids(r.Snapshot().Workers("m", plan.RoleDecode))
	want := []string{"D1", "D10", "D2"} // byte order of ids
	if len(got) != len(want) {
		t.Fatalf("decode workers = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("decode workers = %v, want %v", got, want)
		}
	}
	if ws := r.Snapshot().Workers("m", plan.RolePlain); len(ws) != 0 {
		t.Errorf("plain workers = %v, want none", ids(ws))
	}
}

func TestRegistryRejectsDuplicateIDs(t *testing.T) {
	if _, err := NewRegistry(worker("A", plan.RolePlain), worker("A", plan.RolePlain)); err == nil {
		t.Fatal("NewRegistry accepted a duplicate id")
	}
}

func TestRegistryPutReplacesIdentity(t *testing.T) {
	old := worker("A", plan.RolePlain)
	r, err := NewRegistry(old)
	if err != nil {
		t.Fatal(err)
	}
	before := r.Snapshot()
	fresh := worker("A", plan.RolePlain)
	r.Put(fresh)
	if r.Get("A") != fresh {
		t.Fatal("Get after Put did not return the new worker")
	}
	if before.Get("A") != old {
		t.Fatal("an earlier snapshot changed after Put")
	}
	if r.Snapshot() == before {
		t.Fatal("Put did not publish a new snapshot")
	}
	r.Remove("A")
	if r.Get("A") != nil || len(r.Snapshot().Workers("m", plan.RolePlain)) != 0 {
		t.Fatal("Remove left the worker registered")
	}
}

func TestWorkerHealthAndDefaults(t *testing.T) {
	w := New(plan.Engine{ID: "A", DPSize: 0})
	if !w.Healthy() {
		t.Error("a new worker is not healthy")
	}
	w.SetHealthy(false)
	if w.Healthy() {
		t.Error("SetHealthy(false) left the worker healthy")
	}
	if w.DPSize() != 1 {
		t.Errorf("DPSize = %d, want 1 for an unset size", w.DPSize())
	}
}
