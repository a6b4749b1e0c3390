package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// nodeSelect reads nodes with their placed runtimes: confirmed placements, and unconfirmed
// ones younger than domain.PlacementPending (its one argument is that cutoff).
const nodeSelect = `
SELECT n.*, (SELECT COUNT(*) FROM runtime_placements p WHERE p.node = n.name
    AND (p.confirmed_at IS NOT NULL OR p.placed_at > ?)) AS runtimes
FROM nodes n`

func (q *Q) placementCutoff(ctx context.Context) (time.Time, error) {
	now, err := q.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(-domain.PlacementPending), nil
}

// PlaceRuntime chooses a node for the session's runtime (domain.Place, the session's own
// earlier placement not counted) and takes a slot there, in one exclusive transaction: two
// wakes at once never both take a node's last slot. A placement that names no node takes
// nothing and drops the session's earlier one.
func (s *Store) PlaceRuntime(ctx context.Context, session uuid.UUID, ask domain.PlacementAsk) (domain.NodePlacement, error) {
	var out domain.NodePlacement
	err := s.InTx(ctx, func(q *Q) error {
		nodes, err := q.ListNodes(ctx)
		if err != nil {
			return err
		}
		var own struct {
			Node      string     `db:"node"`
			PlacedAt  time.Time  `db:"placed_at"`
			Confirmed *time.Time `db:"confirmed_at"`
		}
		switch err := q.get(ctx, &own, `SELECT node, placed_at, confirmed_at FROM runtime_placements WHERE runtime_session_id = ?`, session); {
		case err == nil:
			cutoff, err := q.placementCutoff(ctx)
			if err != nil {
				return err
			}
			if own.Confirmed != nil || own.PlacedAt.After(cutoff) {
				for i := range nodes {
					if nodes[i].Name == own.Node {
						nodes[i].Runtimes--
					}
				}
			}
		case !errors.Is(err, ErrNotFound):
			return err
		}
		now, err := q.Now(ctx)
		if err != nil {
			return err
		}
		out = domain.Place(nodes, now, ask)
		if out.Node == "" {
			_, err = q.exec(ctx, `DELETE FROM runtime_placements WHERE runtime_session_id = ?`, session)
			return err
		}
		_, err = q.exec(ctx, `
INSERT INTO runtime_placements (runtime_session_id, node, placed_at, confirmed_at) VALUES (?, ?, ?, NULL)
ON CONFLICT (runtime_session_id) DO UPDATE SET node = excluded.node, placed_at = excluded.placed_at, confirmed_at = NULL`,
			session, out.Node, now)
		return err
	})
	if err != nil {
		return domain.NodePlacement{}, fmt.Errorf("place runtime of %s: %w", session, err)
	}
	return out, nil
}

// ConfirmPlacement records that the session's runtime runs on node: its slot counts until
// released, however long the runtime lives.
func (q *Q) ConfirmPlacement(ctx context.Context, session uuid.UUID, node string) error {
	now, err := q.Now(ctx)
	if err != nil {
		return err
	}
	_, err = q.exec(ctx, `
INSERT INTO runtime_placements (runtime_session_id, node, placed_at, confirmed_at) VALUES (?, ?, ?, ?)
ON CONFLICT (runtime_session_id) DO UPDATE SET node = excluded.node, confirmed_at = excluded.confirmed_at`,
		session, node, now, now)
	if err != nil {
		return fmt.Errorf("confirm placement of %s on %s: %w", session, node, err)
	}
	return nil
}

// ReleasePlacement frees the session's slot on node (its runtime ended there). A placement
// the session has since taken on another node stays.
func (q *Q) ReleasePlacement(ctx context.Context, session uuid.UUID, node string) error {
	if _, err := q.exec(ctx, `DELETE FROM runtime_placements WHERE runtime_session_id = ? AND node = ?`, session, node); err != nil {
		return fmt.Errorf("release placement of %s on %s: %w", session, node, err)
	}
	return nil
}

// ClearNodePlacements frees every slot on node: its worker starts with no runtime.
func (q *Q) ClearNodePlacements(ctx context.Context, node string) error {
	if _, err := q.exec(ctx, `DELETE FROM runtime_placements WHERE node = ?`, node); err != nil {
		return fmt.Errorf("clear placements of %s: %w", node, err)
	}
	return nil
}

// SetNodeDraining takes the node out of service (no new runtimes) or back in.
func (q *Q) SetNodeDraining(ctx context.Context, node string, draining bool) (domain.Node, error) {
	res, err := q.exec(ctx, `UPDATE nodes SET draining = ? WHERE name = ?`, draining, node)
	if err != nil {
		return domain.Node{}, fmt.Errorf("drain node %s: %w", node, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return domain.Node{}, fmt.Errorf("drain node %s: %w", node, err)
	} else if n == 0 {
		return domain.Node{}, fmt.Errorf("drain node %s: %w", node, ErrNotFound)
	}
	return q.GetNode(ctx, node)
}
