package provider

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"

	"github.com/jam-dev/jam/internal/domain"
)

func TestRetireDoesNotWaitForASlowSink(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := NewStamper(uuid.New(), 1, false, func(AgentEvent) { <-release })
	go s.Emit(AgentEvent{Kind: domain.AgentTurnStarted})
	time.Sleep(50 * time.Millisecond) // the emit is now inside the sink
	done := make(chan struct{})
	go func() { s.Retire(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Retire waited for the sink")
	}
	close(release)
	assert.False(t, s.Emit(AgentEvent{Kind: domain.AgentTurnStarted}), "a retired stamper emits nothing")
}
