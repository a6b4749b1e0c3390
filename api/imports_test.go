package api

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAPIReachesWorkflowsOnlyThroughTheContract: the REST layer talks to Temporal through
// internal/contract; importing the workflow or activity code would make an activity's
// payload the REST response shape again.
func TestAPIReachesWorkflowsOnlyThroughTheContract(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "./client").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "github.com/jam-dev/jam/activities", "github.com/jam-dev/jam/workflows", "github.com/jam-dev/jam/workers":
			t.Errorf("api depends on %s; go through internal/contract", pkg)
		}
	}
}
