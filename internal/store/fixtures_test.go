package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// Fixtures insert the records that later issues give repositories of their own; the
// conformance tests need them to exercise the schema's cardinality rules.

var fixtureTime = domain.Timestamp(time.Date(2026, 12, 2, 10, 0, 0, 123456000, time.UTC))

func mustExec(t testing.TB, s *Store, query string, args ...any) {
	t.Helper()
	if _, err := s.exec(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

type agentFixture struct {
	agent, template uuid.UUID
}

func newAgent(t testing.TB, s *Store) agentFixture {
	t.Helper()
	f := agentFixture{agent: uuid.New(), template: uuid.New()}
	mustExec(t, s, `INSERT INTO agents (id, name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		f.agent, "agent-"+f.agent.String()[:8], domain.AgentOwned, fixtureTime, fixtureTime)
	mustExec(t, s, `INSERT INTO runtime_templates (id, agent_id, alias, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		f.template, f.agent, "default", `{}`, fixtureTime, fixtureTime)
	return f
}

func newSession(t testing.TB, s *Store, a agentFixture) uuid.UUID {
	t.Helper()
	id := uuid.New()
	mustExec(t, s, `INSERT INTO runtime_sessions (id, agent_id, template_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		id, a.agent, a.template, fixtureTime, fixtureTime)
	return id
}

func insertHost(s *Store, a agentFixture, id uuid.UUID, placement domain.Placement, state domain.RuntimeHostState) error {
	_, err := s.exec(context.Background(), `
INSERT INTO runtime_hosts (id, agent_id, template_id, placement, state, node, sandboxed, compatibility, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, a.agent, a.template, placement, state, "node-a", false, "fp", fixtureTime, fixtureTime)
	return err
}

func newHost(t testing.TB, s *Store, a agentFixture, placement domain.Placement) uuid.UUID {
	t.Helper()
	id := uuid.New()
	if err := insertHost(s, a, id, placement, domain.HostActive); err != nil {
		t.Fatalf("insert host: %v", err)
	}
	return id
}

type workspaceFixture struct {
	workspace, host, session uuid.UUID
}

func newWorkspace(t testing.TB, s *Store) workspaceFixture {
	t.Helper()
	a := newAgent(t, s)
	session := newSession(t, s, a)
	host := newHost(t, s, a, domain.PlacementDedicated)
	ws := uuid.New()
	mustExec(t, s, `
INSERT INTO managed_workspaces (id, runtime_host_id, runtime_session_id, source, state, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?)`, ws, host, session, domain.WorkspaceManaged, domain.WorkspaceReady, fixtureTime, fixtureTime)
	return workspaceFixture{workspace: ws, host: host, session: session}
}
