package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/procgroup"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

func agentSpec(t *testing.T, session uuid.UUID, gen int64, args ...string) provider.Spec {
	return provider.Spec{RuntimeSession: session, Generation: gen, Transport: domain.TransportACP,
		Executable: testagent.Binary(t), Args: append([]string{"--state-dir", t.TempDir()}, args...),
		Env: os.Environ(), Dir: t.TempDir()}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func requireGroupGone(t *testing.T, pgid int) {
	t.Helper()
	wait.Eventually(t, 10*time.Second, func() error {
		if n, err := provider.ProcessGroupMembers(pgid); err != nil || n != 0 {
			return fmt.Errorf("%d members (%v)", n, err)
		}
		return nil
	}, "process group %d to have no members", pgid)
}

func startRuntime(t *testing.T, r *RuntimeRegistry, spec provider.Spec) (provider.Runtime, provider.Prepared) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rt, p, err := r.Start(ctx, spec)
	require.NoError(t, err)
	return rt, p
}

func TestRegistryStartIsIdempotentForOneGeneration(t *testing.T) {
	r := NewRuntimeRegistry(quietLog(), nil, nil)
	defer r.Shutdown(context.Background())
	spec := agentSpec(t, uuid.New(), 1)
	rt, p := startRuntime(t, r, spec)
	rt2, p2 := startRuntime(t, r, spec)
	assert.Same(t, rt, rt2)
	assert.Equal(t, p.ProviderSessionID, p2.ProviderSessionID)
	assert.Equal(t, 1, r.Len())
	got, gen, ok := r.Get(spec.RuntimeSession)
	require.True(t, ok)
	assert.Same(t, rt, got)
	assert.Equal(t, int64(1), gen)
}

func TestRegistryReplacesAnOlderGenerationAndFencesTurns(t *testing.T) {
	r := NewRuntimeRegistry(quietLog(), nil, nil)
	defer r.Shutdown(context.Background())
	session := uuid.New()
	old, _ := startRuntime(t, r, agentSpec(t, session, 1))
	oldPID := old.Liveness().PID
	startRuntime(t, r, agentSpec(t, session, 2))
	requireGroupGone(t, oldPID)
	assert.Equal(t, 1, r.Len(), "one session never has two live instances")

	_, err := r.RunTurn(context.Background(), session, 1, provider.Turn{ID: "t"})
	assert.ErrorIs(t, err, ErrRuntimeNotLive, "a retired generation cannot run a turn")
	_, _, err = r.Start(context.Background(), agentSpec(t, session, 1))
	assert.Error(t, err, "an older generation cannot displace the live one")

	msg := provider.Message{ID: uuid.New(), AuthorKind: domain.ParticipantHuman, AuthorName: "alice", Text: "ping"}
	res, err := r.RunTurn(context.Background(), session, 2, provider.Turn{ID: "t2", Messages: []provider.Message{msg}})
	require.NoError(t, err)
	assert.Equal(t, "echo: ping", res.Plan.Settles[0].Text)
}

func TestRegistryReportsAChildThatExitsOnItsOwn(t *testing.T) {
	exits := make(chan RuntimeExit, 4)
	r := NewRuntimeRegistry(quietLog(), nil, func(e RuntimeExit) { exits <- e })
	defer r.Shutdown(context.Background())

	t.Run("between turns", func(t *testing.T) {
		spec := agentSpec(t, uuid.New(), 3, "--grandchild")
		rt, _ := startRuntime(t, r, spec)
		pid := rt.Liveness().PID
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		select {
		case e := <-exits:
			assert.Equal(t, RuntimeExit{RuntimeSession: spec.RuntimeSession, Generation: 3, Reason: domain.RuntimeExitedIdle}, e)
		case <-time.After(10 * time.Second):
			t.Fatal("the exit was not reported")
		}
		_, _, ok := r.Get(spec.RuntimeSession)
		assert.False(t, ok)
		requireGroupGone(t, pid)
	})

	t.Run("during a turn", func(t *testing.T) {
		spec := agentSpec(t, uuid.New(), 1)
		rt, _ := startRuntime(t, r, spec)
		pid := rt.Liveness().PID
		msg := provider.Message{ID: uuid.New(), AuthorKind: domain.ParticipantHuman, Text: "[[crash]]"}
		res, err := r.RunTurn(context.Background(), spec.RuntimeSession, 1, provider.Turn{ID: "c", Messages: []provider.Message{msg}})
		require.NoError(t, err)
		assert.Equal(t, domain.TurnFailed, res.Outcome)
		select {
		case e := <-exits:
			assert.Equal(t, domain.RuntimeExitedTurn, e.Reason)
		case <-time.After(10 * time.Second):
			t.Fatal("the exit was not reported")
		}
		requireGroupGone(t, pid)
	})

	t.Run("a teardown is not reported as an exit", func(t *testing.T) {
		spec := agentSpec(t, uuid.New(), 1)
		rt, _ := startRuntime(t, r, spec)
		pid := rt.Liveness().PID
		require.NoError(t, r.Teardown(context.Background(), spec.RuntimeSession, domain.CheckpointBeforeStop))
		requireGroupGone(t, pid)
		select {
		case e := <-exits:
			t.Fatalf("unexpected exit report %+v", e)
		case <-time.After(300 * time.Millisecond):
		}
		require.NoError(t, r.Teardown(context.Background(), spec.RuntimeSession, domain.CheckpointBeforeStop), "idempotent")
	})
}

func TestRegistryShutdownLeavesNoChildBehind(t *testing.T) {
	r := NewRuntimeRegistry(quietLog(), nil, nil)
	var pids []int
	for i := 0; i < 2; i++ {
		rt, _ := startRuntime(t, r, agentSpec(t, uuid.New(), 1, "--grandchild"))
		pids = append(pids, rt.Liveness().PID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r.Shutdown(ctx)
	for _, pid := range pids {
		requireGroupGone(t, pid)
	}
	assert.Zero(t, r.Len())
	_, _, err := r.Start(context.Background(), agentSpec(t, uuid.New(), 1))
	assert.ErrorIs(t, err, ErrRegistryClosed)
}

// Issue 17: a provider that never answered initialize made a clean stop wait 31 s. Closing
// the registry ends a start handshake at once and leaves a live runtime's turns alone.
func TestClosingTheRegistryEndsAHandshakeInFlightButNotALiveRuntime(t *testing.T) {
	r := NewRuntimeRegistry(quietLog(), nil, nil)
	defer r.Shutdown(context.Background())
	live, _ := startRuntime(t, r, agentSpec(t, uuid.New(), 1))
	mute := filepath.Join(t.TempDir(), "mute-agent")
	require.NoError(t, os.WriteFile(mute, []byte("#!/bin/sh\nexec sleep 120\n"), 0o755))
	spec := provider.Spec{RuntimeSession: uuid.New(), Generation: 1, Transport: domain.TransportACP,
		Executable: mute, Dir: t.TempDir(), ReadyTimeout: time.Minute}
	done := make(chan error, 1)
	go func() { _, _, err := r.Start(context.Background(), spec); done <- err }()
	wait.Eventually(t, 10*time.Second, func() bool { return r.Len() == 2 }, "two runtimes in the registry")
	start := time.Now()
	r.Close(context.Background())
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the handshake in flight outlived Close")
	}
	assert.Less(t, time.Since(start), 2*provider.ChildShutdownGrace)
	assert.True(t, live.Liveness().ProcessAlive, "Close stopped a live runtime")
	_, _, err := r.Start(context.Background(), agentSpec(t, uuid.New(), 1))
	assert.ErrorIs(t, err, ErrRegistryClosed)
}

func TestRegistryRefusesTransportsWithoutAnAdapter(t *testing.T) {
	r := NewRuntimeRegistry(quietLog(), nil, nil)
	defer r.Shutdown(context.Background())
	for _, tr := range []domain.Transport{domain.TransportAttachInbox, domain.TransportPTY} {
		spec := agentSpec(t, uuid.New(), 1)
		spec.Transport = tr
		_, _, err := r.Start(context.Background(), spec)
		assert.ErrorIs(t, err, ErrUnsupportedTransport, tr)
	}
}

// Two activities racing to start one session's runtime must end with one process, not an
// untracked second one.
func TestConcurrentStartsOfOneSessionShareOneRuntime(t *testing.T) {
	r := NewRuntimeRegistry(quietLog(), nil, nil)
	defer r.Shutdown(context.Background())
	spec := agentSpec(t, uuid.New(), 1)
	const n = 6
	type result struct {
		rt  provider.Runtime
		p   provider.Prepared
		err error
	}
	results := make(chan result, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rt, p, err := r.Start(ctx, spec)
			results <- result{rt, p, err}
		}()
	}
	close(start)
	var first result
	for i := range n {
		res := <-results
		require.NoError(t, res.err)
		if i == 0 {
			first = res
			continue
		}
		assert.Same(t, first.rt, res.rt)
		assert.Equal(t, first.p.PID, res.p.PID)
	}
	assert.Equal(t, 1, r.Len())
	r.mu.Lock()
	groups := len(r.groups)
	r.mu.Unlock()
	assert.Equal(t, 1, groups, "exactly one process group was started")
}

// recordedGroups reads the group records in dir.
func recordedGroups(t *testing.T, dir string) []procgroup.Record {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []procgroup.Record
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		var rec procgroup.Record
		require.NoError(t, json.Unmarshal(b, &rec), e.Name())
		out = append(out, rec)
	}
	return out
}

// The group is on disk by the time the runtime is prepared (before any turn) and gone once
// the group is reaped; a group that cannot be recorded does not run.
func TestRegistryRecordsEachProcessGroupUntilItIsReaped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "process-groups")
	rec, err := procgroup.NewRecorder(dir, nil)
	require.NoError(t, err)
	r := NewRuntimeRegistry(quietLog(), nil, nil, WithGroupRecords(rec))
	defer r.Shutdown(context.Background())

	spec := agentSpec(t, uuid.New(), 1, "--grandchild")
	rt, _ := startRuntime(t, r, spec)
	pid := rt.Liveness().PID
	recs := recordedGroups(t, dir)
	require.Len(t, recs, 1)
	leader, err := procgroup.ReadStat(pid)
	require.NoError(t, err)
	assert.Equal(t, pid, recs[0].PGID)
	assert.Equal(t, pid, recs[0].LeaderPID)
	assert.Equal(t, leader.Start, recs[0].LeaderStart)
	assert.Equal(t, spec.RuntimeSession.String(), recs[0].RuntimeSession)
	assert.Equal(t, os.Getpid(), recs[0].Owner)

	require.NoError(t, r.Teardown(context.Background(), spec.RuntimeSession, domain.CheckpointBeforeStop))
	requireGroupGone(t, pid)
	wait.Eventually(t, 5*time.Second, func() bool { return len(recordedGroups(t, dir)) == 0 }, "no recorded process group")

	// The records directory is replaced by a file: nothing can be written there.
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.WriteFile(dir, nil, 0o600))
	before := providerProcesses(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, err = r.Start(ctx, agentSpec(t, uuid.New(), 1))
	require.Error(t, err)
	assert.Equal(t, 0, r.Len())
	wait.Eventually(t, 5*time.Second, func() bool { return len(providerProcesses(t)) <= len(before) },
		"the unrecorded child to end")
}

// providerProcesses lists the live test-agent processes whose parent is this test.
func providerProcesses(t *testing.T) []int {
	t.Helper()
	procs, err := procgroup.Host.Processes()
	require.NoError(t, err)
	exe := testagent.Binary(t)
	var out []int
	for _, p := range procs {
		if p.Dead() {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p.PID), "exe")); err == nil && target == exe {
			out = append(out, p.PID)
		}
	}
	return out
}

// A stop that interrupts a turn whose activity has not reached the node yet (the workflow
// scheduled it; the worker has not picked it up) must not be lost: that turn starts
// cancelled and never reaches the provider. Another turn is not affected.
func TestAnInterruptThatComesBeforeItsTurnCancelsThatTurn(t *testing.T) {
	r := NewRuntimeRegistry(quietLog(), nil, nil)
	defer r.Shutdown(context.Background())
	session := uuid.New()
	startRuntime(t, r, agentSpec(t, session, 1))
	msg := provider.Message{ID: uuid.New(), AuthorKind: domain.ParticipantHuman, AuthorName: "alice", Text: "[[count]]"}

	require.NoError(t, r.Interrupt(context.Background(), session, 1, "g1-t1"))
	res, err := r.RunTurn(context.Background(), session, 1, provider.Turn{ID: "g1-t1", Messages: []provider.Message{msg}})
	require.NoError(t, err)
	assert.Equal(t, domain.TurnCancelled, res.Outcome)
	assert.Empty(t, res.Plan.Settles)

	// An interrupt meant for a turn that already ended does not cancel the next one.
	require.NoError(t, r.Interrupt(context.Background(), session, 1, "g1-t1"))
	res, err = r.RunTurn(context.Background(), session, 1, provider.Turn{ID: "g1-t2", Messages: []provider.Message{msg}})
	require.NoError(t, err)
	require.Len(t, res.Plan.Settles, 1)
	assert.Equal(t, "turns remembered: 0", res.Plan.Settles[0].Text, "the cancelled turn never reached the agent")
}
