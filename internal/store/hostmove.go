package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// RehomeHost moves a sandboxed runtime host's record to node to when domain.MayRehome allows
// it (its node is fenced, or draining and the host parked — its workflow says so, holding
// its sandbox lock; to is live, may sandbox and shares its host store), and returns the
// host as it stands after: on to when it moved (or had moved already), else where it was. A
// host whose node is unknown, or that is archived or removed, stays. The move is conditional
// on the node read, so two members asking at once move it once.
func (s *Store) RehomeHost(ctx context.Context, host uuid.UUID, to string, parked bool) (domain.RuntimeHost, error) {
	var out domain.RuntimeHost
	err := s.InTx(ctx, func(q *Q) error {
		h, err := q.GetRuntimeHost(ctx, host)
		if err != nil {
			return err
		}
		out = h
		if h.Node == to || h.Node == "" || !h.Sandboxed || h.State == domain.HostArchived || h.State == domain.HostRemoved {
			return nil
		}
		from, err := q.GetNode(ctx, h.Node)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		dest, err := q.GetNode(ctx, to)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		now, err := q.Now(ctx)
		if err != nil {
			return err
		}
		if !domain.MayRehome(from, dest, now, parked) {
			return nil
		}
		if _, err := q.exec(ctx, `UPDATE runtime_hosts SET node = ?, updated_at = ? WHERE id = ? AND node = ?`,
			to, now, host, h.Node); err != nil {
			return fmt.Errorf("move runtime host %s to node %s: %w", host, to, err)
		}
		out.Node, out.UpdatedAt = to, now
		return nil
	})
	return out, err
}
