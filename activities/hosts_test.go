package activities_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// leases answers like a RuntimeHost whose control is running: the rejection's type is what
// the RoomSession's retry policy tells apart.
type busyLeases struct{}

func (busyLeases) Acquire(context.Context, string, uuid.UUID, uuid.UUID, string) (contract.HostLease, error) {
	return contract.HostLease{}, fmt.Errorf("acquire runtime host: %w",
		contract.Fail("a host control is running", domain.ErrTypeHostBusy, nil))
}
func (busyLeases) Release(context.Context, string, uuid.UUID, uuid.UUID, domain.CheckpointReason) error {
	return nil
}
func (busyLeases) Permit(context.Context, string, uuid.UUID, uuid.UUID) error   { return nil }
func (busyLeases) Unpermit(context.Context, string, uuid.UUID, uuid.UUID) error { return nil }
func (busyLeases) Settle(context.Context, string, uuid.UUID) error              { return nil }
func (busyLeases) Replace(context.Context, string, contract.CommitHostReplacementInput) (bool, error) {
	return false, nil
}

func TestARejectedAcquireKeepsItsTypeThroughTheActivity(t *testing.T) {
	w := newSandboxWorld(t, domain.AuthProviderLogin)
	hosts := &activities.Hosts{Store: w.st, Leases: busyLeases{}}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(hosts)
	_, err := env.ExecuteActivity(hosts.AcquireHost, activities.AcquireHostInput{RuntimeSession: w.session, Node: "n1"})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, string(domain.ErrTypeHostBusy), app.Type())
}
