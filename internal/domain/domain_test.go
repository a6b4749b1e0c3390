package domain

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestEnumsDecodeOnlyTheirWireNames(t *testing.T) {
	t.Parallel()
	var body struct {
		Transport Transport `json:"transport"`
		Placement Placement `json:"placement"`
	}
	if err := json.Unmarshal([]byte(`{"transport":"codex-app-server","placement":"shared_agent_host"}`), &body); err != nil {
		t.Fatal(err)
	}
	if body.Transport != TransportCodexAppServer || body.Placement != PlacementShared {
		t.Fatalf("decoded %+v", body)
	}
	err := json.Unmarshal([]byte(`{"transport":"Codex"}`), &body)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "transport" || !strings.Contains(ve.Detail, "codex-app-server") {
		t.Fatalf("unknown transport: %v", err)
	}
}

func TestEveryEnumTableListsDistinctValues(t *testing.T) {
	t.Parallel()
	tables := map[string][]string{
		"transport": Transports.Strings(), "placement": Placements.Strings(), "kind": AgentKinds.Strings(),
		"configuration_source": ConfigurationSources.Strings(), "workspace_source": WorkspaceSources.Strings(),
		"network_profile": NetworkProfiles.Strings(), "host_state": RuntimeHostStates.Strings(),
		"membership": MembershipStates.Strings(), "workspace_state": WorkspaceStates.Strings(),
		"op_kind": WorkspaceOpKinds.Strings(), "op_state": WorkspaceOpStates.Strings(),
		"cleanup_stage": CleanupStages.Strings(), "checkpoint_reason": CheckpointReasons.Strings(),
		"resume": ResumeOutcomes.Strings(), "pending": PendingChangeStatuses.Strings(), "run_intent": RunIntents.Strings(),
	}
	for name, values := range tables {
		seen := map[string]bool{}
		for _, v := range values {
			if v == "" || seen[v] {
				t.Errorf("%s: empty or duplicate value %q", name, v)
			}
			seen[v] = true
		}
	}
}

func TestParseIDAcceptsOnlyCanonicalUUIDs(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	if got, err := ParseID("id", id.String()); err != nil || got != id {
		t.Fatalf("canonical: %v %v", got, err)
	}
	for _, bad := range []string{"", "nope", strings.ToUpper(id.String()), "{" + id.String() + "}",
		"urn:uuid:" + id.String(), uuid.Nil.String(), "../" + id.String()} {
		if _, err := ParseID("id", bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestTerminalWorkspaceOperationsNeedFinishTime(t *testing.T) {
	t.Parallel()
	op := WorkspaceOperation{ID: uuid.New(), WorkspaceID: uuid.New(), Kind: WorkspaceOpExport, State: OpSucceeded, StartedAt: Timestamp(nowForTest)}
	if _, err := CheckWorkspaceOperation(nil, op); err == nil {
		t.Fatal("a new operation may not start terminal, nor without finished_at")
	}
	op.State = OpRunning
	end := op.StartedAt
	op.FinishedAt = &end
	var vs Validations
	if _, err := CheckWorkspaceOperation(nil, op); !errors.As(err, &vs) || vs[0].Field != "finished_at" {
		t.Fatalf("running with finished_at: %v", err)
	}
}

func TestSettingsRegistryValidatesValues(t *testing.T) {
	t.Parallel()
	s, ok := LookupSetting(SettingIdleSecs)
	if !ok {
		t.Fatal("idle setting not registered")
	}
	if err := s.Validate(s.Default); err != nil {
		t.Fatalf("default %s invalid: %v", s.Default, err)
	}
	for _, bad := range []string{`0`, `-5`, `604801`, `"600"`, `600.5`, `null`} {
		if err := s.Validate(json.RawMessage(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

var nowForTest = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestQuestionAnswersAreRecognisedByTheirCode(t *testing.T) {
	for _, tc := range []struct {
		text, code, answer string
		ok                 bool
	}{
		{"Q7K2 yes, go ahead", "Q7K2", "yes, go ahead", true},
		{"q7k2: no", "Q7K2", "no", true},
		{"[Q7K2] maybe", "Q7K2", "maybe", true},
		{"Q7K2", "Q7K2", "", true},
		{"Surely not", "", "", false},
		{"hi", "", "", false},
		{"Q0K2 yes", "", "", false}, // 0 is not in the code alphabet
	} {
		code, answer, ok := ParseQuestionAnswer(tc.text)
		if ok != tc.ok || code != tc.code || answer != tc.answer {
			t.Errorf("ParseQuestionAnswer(%q) = %q %q %v, want %q %q %v", tc.text, code, answer, ok, tc.code, tc.answer, tc.ok)
		}
	}
	if c := NewQuestionCode(); len(c) != 4 {
		t.Fatalf("code %q", c)
	}
}

func TestOnlyOldNewerReplacedUnreferencedArtifactsAreCleanupCandidates(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	old, recent := now.Add(-31*24*time.Hour), now.Add(-29*24*time.Hour)
	for _, c := range []struct {
		name               string
		created            time.Time
		newest, referenced bool
		want               bool
	}{
		{"older than 30 days, superseded, unreferenced", old, false, false, true},
		{"the newest generation", old, true, false, false},
		{"referenced by continuity evidence", old, false, true, false},
		{"younger than 30 days", recent, false, false, false},
	} {
		if got := CleanupCandidate(c.created, now, c.newest, c.referenced); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
