package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/jam-dev/jam/activities"
)

// A message posted while a turn runs is steered into that turn (SteerTurn) instead of
// waiting for the next one; a runtime that cannot steer gets it as the next turn.
func TestAPokeDuringATurnIsSteeredIntoIt(t *testing.T) {
	for _, tc := range []struct {
		name       string
		notSteered bool
		wantTurns  int
	}{
		{"steered", false, 1},
		{"not steerable: the next turn", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSessionEnv(t, func(e *sessionEnv) { e.turnTakes = 10 * time.Second })
			var rt *activities.Runtimes
			steers := 0
			e.env.OnActivity(rt.SteerTurn, mock.Anything, mock.Anything).Return(
				func(context.Context, activities.SteerTurnInput) (activities.SteerTurnResult, error) {
					steers++
					return activities.SteerTurnResult{Messages: 2, NotSteered: tc.notSteered}, nil
				})
			e.backlog = 1                                         // the first load wakes the room and starts the turn
			e.at(5*time.Second, func() { e.backlog++; e.poke() }) // mid-turn
			e.at(40*time.Second, func() {
				if steers != 1 || e.turns != tc.wantTurns {
					t.Errorf("%d steers, %d turns; want 1 steer, %d turns", steers, e.turns, tc.wantTurns)
				}
			})
			e.run(50 * time.Second)
		})
	}
}
