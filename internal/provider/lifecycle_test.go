package provider

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/domain"
)

// fakeAdapter is an adapter whose handshake does what the test says, counting releases.
type fakeAdapter struct {
	handshake func(ctx context.Context) error
	started   atomic.Int32
	released  atomic.Int32
	alive     atomic.Bool
}

func (f *fakeAdapter) lifecycle(t *testing.T, spec Spec) *Lifecycle {
	t.Helper()
	if spec.Executable == "" {
		spec.Executable, spec.Dir = "/bin/true", t.TempDir()
	}
	l, err := NewLifecycle(spec, LifecycleConfig{Name: "fake", Who: "the fake", ReadyFallback: time.Minute})
	require.NoError(t, err)
	l.Bind(Adapter{
		Start: func(context.Context) error { f.started.Add(1); f.alive.Store(true); return nil },
		Handshake: func(ctx context.Context) error {
			if f.handshake == nil {
				return nil
			}
			return f.handshake(ctx)
		},
		Release:  func(context.Context) { f.released.Add(1); f.alive.Store(false) },
		Prepared: func() Prepared { return Prepared{ProviderSessionID: "s1"} },
		Liveness: func() Liveness { return Liveness{ProcessAlive: f.alive.Load()} },
	})
	return l
}

func TestASpecWithoutExecutableOrDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	_, err := NewLifecycle(Spec{Dir: "/tmp"}, LifecycleConfig{Name: "fake"})
	require.ErrorIs(t, err, ErrInvalidSpec)
	_, err = NewLifecycle(Spec{Executable: "/bin/true"}, LifecycleConfig{Name: "fake"})
	require.ErrorIs(t, err, ErrInvalidSpec)
	_, err = NewLifecycle(Spec{Executable: "/bin/true", Dir: "/tmp"}, LifecycleConfig{Name: "fake", NeedStateDir: true})
	require.ErrorIs(t, err, ErrInvalidSpec)
}

func TestPrepareRunsOnceAndTeardownIsIdempotent(t *testing.T) {
	t.Parallel()
	f := &fakeAdapter{}
	l := f.lifecycle(t, Spec{})
	p, err := l.Prepare(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "s1", p.ProviderSessionID)
	_, err = l.Prepare(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 1, f.started.Load(), "a prepared runtime is not started again")
	require.NoError(t, l.Teardown(context.Background(), domain.CheckpointBeforeStop))
	require.NoError(t, l.Teardown(context.Background(), domain.CheckpointBeforeStop))
	assert.EqualValues(t, 1, f.released.Load())
	select {
	case <-l.Exited():
	default:
		t.Fatal("a torn-down runtime has not exited")
	}
	_, err = l.Prepare(context.Background())
	require.ErrorIs(t, err, ErrNotPrepared)
}

func TestAFailedPrepareReleasesWhatItStarted(t *testing.T) {
	t.Parallel()
	refused := errors.New("the agent refused")
	f := &fakeAdapter{handshake: func(context.Context) error { return refused }}
	l := f.lifecycle(t, Spec{})
	_, err := l.Prepare(context.Background())
	require.ErrorIs(t, err, refused)
	assert.EqualValues(t, 1, f.released.Load())
}

// Every adapter says why a cancelled Prepare stopped, whatever its handshake said.
func TestACancelledPrepareSaysWhy(t *testing.T) {
	t.Parallel()
	f := &fakeAdapter{handshake: func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("initialize: the request was abandoned")
	}}
	l := f.lifecycle(t, Spec{})
	why := errors.New("the room was deleted")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(why)
	_, err := l.Prepare(ctx)
	require.ErrorIs(t, err, why)
	assert.Contains(t, err.Error(), "initialize")
	assert.EqualValues(t, 1, f.released.Load())
}

func TestTeardownEndsAPrepareInFlightAndSaysSo(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	f := &fakeAdapter{handshake: func(ctx context.Context) error {
		close(entered)
		<-ctx.Done()
		return context.Cause(ctx)
	}}
	l := f.lifecycle(t, Spec{})
	prepared := make(chan error, 1)
	go func() {
		_, err := l.Prepare(context.Background())
		prepared <- err
	}()
	<-entered
	require.NoError(t, l.Teardown(context.Background(), domain.CheckpointBeforeStop))
	err := <-prepared
	require.ErrorIs(t, err, ErrNotPrepared)
	assert.Contains(t, err.Error(), "torn down")
}

func TestAHandshakeBeyondItsReadinessBoundIsNotReady(t *testing.T) {
	t.Parallel()
	f := &fakeAdapter{handshake: func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	l := f.lifecycle(t, Spec{ReadyTimeout: 50 * time.Millisecond})
	_, err := l.Prepare(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	assert.Contains(t, err.Error(), "the fake did not finish its start handshake within 50ms")
}

func TestTeardownInterruptsTheTurnOfALiveProcessOnly(t *testing.T) {
	t.Parallel()
	for _, alive := range []bool{true, false} {
		f := &fakeAdapter{}
		l := f.lifecycle(t, Spec{RuntimeSession: uuid.New()})
		_, err := l.Prepare(context.Background())
		require.NoError(t, err)
		turn, err := l.BeginTurn(context.Background(), Turn{ID: "t1"}, SettlementOptions{})
		require.NoError(t, err)
		_, err = l.BeginTurn(context.Background(), Turn{ID: "t2"}, SettlementOptions{})
		require.ErrorIs(t, err, ErrTurnInProgress)
		f.alive.Store(alive)
		require.NoError(t, l.Teardown(context.Background(), domain.CheckpointBeforeStop))
		assert.Equal(t, alive, turn.Interrupted(), "a crashed process's turn fails instead (alive=%v)", alive)
		l.EndTurn(turn)
	}
}

func TestIdlePolicyIsTheSpecsElseTheCatalogsElseTheAdapters(t *testing.T) {
	t.Parallel()
	spec := Spec{Executable: "/bin/true", Dir: "/tmp"}
	l, err := NewLifecycle(spec, LifecycleConfig{Name: "fake", IdleFallback: domain.IdleKeepAlive})
	require.NoError(t, err)
	assert.Equal(t, domain.IdleKeepAlive, l.IdlePolicy())
	spec.IdlePolicy = domain.IdleAllow
	l, err = NewLifecycle(spec, LifecycleConfig{Name: "fake", IdleFallback: domain.IdleKeepAlive})
	require.NoError(t, err)
	assert.Equal(t, domain.IdleAllow, l.IdlePolicy())
}

// A process that exits during its handshake ends the Prepare at once, whatever its
// transport still says.
func TestAProcessThatExitsDuringItsHandshakeEndsThePrepare(t *testing.T) {
	t.Parallel()
	f := &fakeAdapter{}
	l := f.lifecycle(t, Spec{})
	f.handshake = func(ctx context.Context) error {
		l.MarkExited()
		<-ctx.Done()
		return errors.New("initialize: abandoned")
	}
	_, err := l.Prepare(context.Background())
	require.ErrorIs(t, err, ErrRuntimeExited)
	assert.NotErrorIs(t, err, ErrNotReady)
}
