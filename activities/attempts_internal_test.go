package activities

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// A PrepareRuntime attempt Temporal will retry keeps its node slot; only the last one frees
// it (an attempt that freed it could see another wake take it, and the retry that started
// the runtime would overfill the node).
func TestOnlyTheLastAttemptOfAStartGivesItsSlotBack(t *testing.T) {
	policy := contract.Retry(temporal.RetryPolicy{MaximumAttempts: 3})
	unlimited := contract.Retry(temporal.RetryPolicy{})
	retryable := errors.New("spawn failed")
	cases := []struct {
		name    string
		err     error
		attempt int32
		policy  *temporal.RetryPolicy
		last    bool
	}{
		{"a retryable failure before the last attempt", retryable, 1, policy, false},
		{"the last attempt", retryable, 3, policy, true},
		{"unlimited attempts", retryable, 40, unlimited, false},
		{"a non-retryable failure", contract.Fail("no adapter", domain.ErrTypeAdapterMissing, nil), 1, policy, true},
		{"a type the policy does not retry", temporal.NewApplicationError("bad", string(domain.ErrTypeValidation)), 1, policy, true},
		{"no policy known", retryable, 1, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := isLastAttempt(c.err, c.attempt, c.policy); got != c.last {
				t.Fatalf("last attempt %v, want %v", got, c.last)
			}
		})
	}
}
