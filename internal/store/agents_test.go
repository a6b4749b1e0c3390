package store

import (
	"context"
	"testing"

	"github.com/jam-dev/jam/internal/domain"
)

func TestAnAgentsQuestionTimeoutIsSetClearedAndBounded(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentOwned, "")
		briefing := "be brief"
		for _, c := range []struct {
			name string
			u    AgentUpdate
			want *int
		}{
			{"set", AgentUpdate{SetQuestionTimeout: true, QuestionTimeoutSecs: ptrInt(60)}, ptrInt(60)},
			{"a briefing leaves it", AgentUpdate{Briefing: &briefing}, ptrInt(60)},
			{"indefinitely", AgentUpdate{SetQuestionTimeout: true, QuestionTimeoutSecs: ptrInt(0)}, ptrInt(0)},
			{"the maximum", AgentUpdate{SetQuestionTimeout: true, QuestionTimeoutSecs: ptrInt(domain.MaxQuestionTimeoutSecs)}, ptrInt(domain.MaxQuestionTimeoutSecs)},
			{"cleared", AgentUpdate{SetQuestionTimeout: true}, nil},
		} {
			got, err := s.UpdateAgent(ctx, a.ID, c.u, fixtureTime)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			read, _ := s.GetAgent(ctx, a.ID)
			for _, v := range []*int{got.QuestionTimeoutSecs, read.QuestionTimeoutSecs} {
				if (v == nil) != (c.want == nil) || (v != nil && *v != *c.want) {
					t.Fatalf("%s: %v, want %v", c.name, v, c.want)
				}
			}
		}
		if read, _ := s.GetAgent(ctx, a.ID); read.Briefing != briefing {
			t.Fatalf("briefing %q", read.Briefing)
		}
		for _, bad := range []int{-1, domain.MaxQuestionTimeoutSecs + 1} {
			if _, err := s.UpdateAgent(ctx, a.ID, AgentUpdate{SetQuestionTimeout: true, QuestionTimeoutSecs: &bad}, fixtureTime); err == nil {
				t.Errorf("%d accepted", bad)
			}
		}
	})
}

func ptrInt(v int) *int { return &v }
