package contract

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestWorkflowIDsRoundTrip(t *testing.T) {
	id := uuid.New()
	cases := []struct {
		name  string
		build func(uuid.UUID) string
		parse func(string) (uuid.UUID, error)
		typ   string
	}{
		{"room session", RoomSessionID, ParseRoomSessionID, TypeRoomSession},
		{"runtime host", RuntimeHostID, ParseRuntimeHostID, TypeRuntimeHost},
		{"workspace op", WorkspaceOpID, ParseWorkspaceOpID, TypeWorkspaceOp},
		{"host cleanup", HostCleanupID, ParseHostCleanupID, TypeHostCleanup},
		{"continuity reset", ContinuityResetID, ParseContinuityResetID, TypeContinuityReset},
		{"checkpoint deletion", CheckpointDeletionID, ParseCheckpointDeletionID, TypeCheckpointDeletion},
		{"continuity inspection", ContinuityInspectionID, ParseContinuityInspectionID, TypeContinuityInspection},
		{"cleanup inspection", CleanupInspectionID, ParseCleanupInspectionID, TypeCleanupInspection},
		{"host measure", HostMeasureID, ParseHostMeasureID, TypeHostMeasure},
		{"host network", HostNetworkID, ParseHostNetworkID, TypeHostNetwork},
		{"removal inspection", RemovalInspectionID, ParseRemovalInspectionID, TypeRemovalInspection},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wid := c.build(id)
			if wid != c.typ+":"+id.String() {
				t.Fatalf("id %q", wid)
			}
			got, err := c.parse(wid)
			if err != nil || got != id {
				t.Fatalf("parse(%q) = %v, %v", wid, got, err)
			}
			for _, bad := range []string{
				"", c.typ, c.typ + ":", c.typ + ":not-a-uuid", c.typ + ":" + strings.ToUpper(id.String()),
				"Other:" + id.String(), c.typ + ":" + id.String() + ":x",
			} {
				if _, err := c.parse(bad); err == nil {
					t.Errorf("parse(%q) accepted", bad)
				}
			}
		})
	}
}

func TestTemplateApplyIDCarriesTheGeneration(t *testing.T) {
	tmpl := uuid.New()
	wid := TemplateApplyID(tmpl, 7)
	got, gen, err := ParseTemplateApplyID(wid)
	if err != nil || got != tmpl || gen != 7 {
		t.Fatalf("parse(%q) = %v %d %v", wid, got, gen, err)
	}
	for _, bad := range []string{
		TypeTemplateApply + ":" + tmpl.String(), TypeTemplateApply + ":" + tmpl.String() + ":0",
		TypeTemplateApply + ":" + tmpl.String() + ":-1", TypeTemplateApply + ":" + tmpl.String() + ":07",
		TypeTemplateApply + ":x:1",
	} {
		if _, _, err := ParseTemplateApplyID(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

func TestNodeNamesRoundTripThroughQueuesAndProbeIDs(t *testing.T) {
	for _, node := range []string{"vm", "worker-1", "host.example.com"} {
		if got, err := ParseNodeTaskQueue(NodeTaskQueue(node)); err != nil || got != node {
			t.Errorf("queue of %s: %q %v", node, got, err)
		}
		for _, ids := range []struct {
			build func(string) string
			parse func(string) (string, error)
		}{{NodeProbeID, ParseNodeProbeID}, {SandboxProbeID, ParseSandboxProbeID}, {SandboxInventoryID, ParseSandboxInventoryID}} {
			if got, err := ids.parse(ids.build(node)); err != nil || got != node {
				t.Errorf("id %s of %s: %q %v", ids.build(node), node, got, err)
			}
			if _, err := ids.parse(ids.build("a b")); err == nil {
				t.Errorf("id %q accepted", ids.build("a b"))
			}
		}
	}
	for _, bad := range []string{TaskQueue, "jam.node.", "jam.node.a b", "other.node.x"} {
		if _, err := ParseNodeTaskQueue(bad); err == nil {
			t.Errorf("queue %q accepted", bad)
		}
	}
}

// A template check is one node's question: the same question shares a run, another gets its
// own, and the id names the node.
func TestTemplateCheckIDsNameTheNodeAndTheQuestion(t *testing.T) {
	in := TemplateCheckInput{Node: "worker-1", Transport: "acp", Env: []string{"A"}}
	other := in
	other.Env = []string{"B"}
	if TemplateCheckID(in) != TemplateCheckID(in) || TemplateCheckID(in) == TemplateCheckID(other) {
		t.Fatalf("ids %q %q", TemplateCheckID(in), TemplateCheckID(other))
	}
	if node, err := ParseTemplateCheckID(TemplateCheckID(in)); err != nil || node != "worker-1" {
		t.Fatalf("parse: %q %v", node, err)
	}
	if typ, err := ParseWorkflowType(TemplateCheckID(in)); err != nil || typ != TypeTemplateCheck {
		t.Fatalf("type: %q %v", typ, err)
	}
	for _, bad := range []string{TypeTemplateCheck + ":worker-1", TypeTemplateCheck + ":worker-1/xyz", TypeTemplateCheck + ":/0123456789ab"} {
		if _, err := ParseTemplateCheckID(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}
