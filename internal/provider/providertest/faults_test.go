package providertest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// The fault scenarios run the real CLI under cmd/jam-testwrap (see the package doc): the
// CLI speaks its real protocol and the wrapper adds the one fault.

// handshakeBytes is how much of the CLI's first output reaches the adapter before the
// wrapper exits: part of its first message.
const handshakeBytes = 20

// handshakeExit: the child exits part-way through its first message. Prepare fails at once
// (not at its readiness bound), classified, and the CLI the wrapper left is reaped.
func handshakeExit(t *testing.T, a adapter) {
	l := newLane(t, a)
	ack := filepath.Join(t.TempDir(), "ack")
	l.wrapped(map[string]string{"EXIT_AFTER": strconv.Itoa(handshakeBytes), "ACK": ack})
	in := l.build("", 1)
	_, err := in.prepare()
	failed := time.Now()
	require.Error(t, err)
	// Measured from the exit, not from the start: a CLI may take long to say its first bytes.
	st, statErr := os.Stat(ack)
	require.NoError(t, statErr, "the wrapper never exited")
	took := failed.Sub(st.ModTime())
	t.Logf("prepare failed %v after the child exited: %v", took, err)
	assert.Less(t, took, failBound, "prepare did not see the exit")
	assert.False(t, errors.Is(err, provider.ErrNotReady), "the exit was not seen before the readiness bound")
	assert.False(t, errors.Is(err, provider.ErrExactResumeUnavailable), "a dead child is not a missing thread")
	if a.caps.HandshakeExitClassified {
		assert.ErrorIs(t, err, provider.ErrRuntimeExited)
	} else if errors.Is(err, provider.ErrRuntimeExited) {
		t.Logf("%s classified this handshake exit as ErrRuntimeExited", a.name)
	}
	assert.False(t, in.rt.Liveness().ProcessAlive)
	select {
	case pid := <-l.spawned:
		groupGone(t, pid)
	case <-time.After(refusalBound):
		t.Fatal("no child was started")
	}
}

// badOutput: a garbage message between two real ones is dropped and the runtime goes on;
// an oversized one is dropped too, or ends the runtime cleanly, as the adapter declares.
func badOutput(t *testing.T, a adapter) {
	l := newLane(t, a)
	ack := filepath.Join(t.TempDir(), "ack")
	l.wrapped(map[string]string{"ACK": ack})
	in, p := l.start("", 1)
	inject := func(sig syscall.Signal, kind string) {
		t.Helper()
		require.NoError(t, syscall.Kill(p.PID, sig))
		wait.Eventually(t, failBound, func() bool {
			b, _ := os.ReadFile(ack)
			return strings.Contains(string(b), "injected "+kind)
		}, "the wrapper to inject %s", kind)
	}

	inject(syscall.SIGUSR1, "garbage")
	m := human("after garbage " + a.say("reply"))
	res := run(t, in.rt, turnOf(m))
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	s, ok := settleOf(res.Plan, m.ID)
	assert.True(t, ok && s.How == domain.SettledReply, "plan %+v", res.Plan)
	assert.True(t, in.rt.Liveness().TransportOpen, "garbage closed the transport")

	inject(syscall.SIGUSR2, "oversized")
	m = human("after oversized " + a.say("reply"))
	ctx, cancel := context.WithTimeout(context.Background(), turnBound)
	defer cancel()
	start := time.Now()
	res, err := in.rt.RunTurn(ctx, turnOf(m))
	require.NoError(t, ctx.Err(), "the turn after an oversized message hung")
	if a.caps.OversizedSurvives {
		require.NoError(t, err)
		require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
		_, ok := settleOf(res.Plan, m.ID)
		assert.True(t, ok, "plan %+v", res.Plan)
		return
	}
	t.Logf("the turn after an oversized message ended after %v: %+v, %v", time.Since(start), res, err)
	assert.True(t, exitedErr(res, err), "turn %+v, error %v", res, err)
	exited(t, in.rt)
	require.NoError(t, in.rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
	groupGone(t, p.PID)
}
