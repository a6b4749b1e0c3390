package workflows

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// A session's last error is read by people: an activity timeout says what it means for the
// node, not Temporal's event ids.
func TestErrorTextSaysWhatATimeoutMeansForTheNode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("activity error (type: PrepareRuntime, scheduledEventID: 135): %w",
			temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)), "the node's worker is down or overloaded"},
		{temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, errors.New("last beat")), "it died or hung"},
		{temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), "did not finish in time"},
		{contract.Fail("executable refused", domain.ErrTypeExecutableRefused, nil), "executable refused"},
	} {
		got := errorText(c.err)
		if !strings.Contains(got, c.want) || strings.Contains(got, "EventID") {
			t.Errorf("errorText(%v) = %q, want it to say %q", c.err, got, c.want)
		}
	}
}
