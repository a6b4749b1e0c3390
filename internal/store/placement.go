package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/schema"
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

// placeAttempts bounds how often a placement chooses again because its node filled up
// between the choice and the slot, before it takes the exclusive path.
const placeAttempts = 4

// PlaceRuntime chooses a node for the session's runtime (domain.Place, the session's own
// earlier placement not counted) and takes a slot there; two wakes at once never both take
// a node's last slot. A placement that names no node takes nothing and drops the session's
// earlier one.
//
// On Postgres the choice is made from a plain read and the slot is taken in a transaction
// scoped to the chosen node (NodeScope), which counts that node's slots again: placements on
// different nodes, and every room's posts, run side by side instead of behind one exclusive
// writer (issue 25). A node that filled up meanwhile makes the wake choose again. SQLite has
// one writer, so there it is one exclusive transaction.
func (s *Store) PlaceRuntime(ctx context.Context, session uuid.UUID, ask domain.PlacementAsk) (domain.NodePlacement, error) {
	if s.dialect == schema.Postgres {
		for range placeAttempts {
			out, ok, err := s.placeOnChosenNode(ctx, session, ask)
			if err != nil {
				return domain.NodePlacement{}, fmt.Errorf("place runtime of %s: %w", session, err)
			}
			if ok {
				return out, nil
			}
		}
	}
	var out domain.NodePlacement
	err := s.InTx(ctx, func(q *Q) error {
		var err error
		out, err = q.choosePlacement(ctx, session, ask)
		if err != nil || out.Node == "" {
			return err
		}
		return q.takeSlot(ctx, session, out.Node)
	})
	if err != nil {
		return domain.NodePlacement{}, fmt.Errorf("place runtime of %s: %w", session, err)
	}
	return out, nil
}

// placeOnChosenNode chooses from a plain read, then takes the slot under the node's own
// lock if the node still has one. ok is false when it filled up meanwhile.
func (s *Store) placeOnChosenNode(ctx context.Context, session uuid.UUID, ask domain.PlacementAsk) (domain.NodePlacement, bool, error) {
	out, err := s.choosePlacement(ctx, session, ask)
	if err != nil || out.Node == "" {
		return out, err == nil, err
	}
	ok := false
	err = s.InScopedTx(ctx, NodeScope(out.Node), func(q *Q) error {
		// Every placement on the node holds this lock, so the count in the statement is
		// final until commit. One statement: the lock is held for one round trip.
		res, err := q.exec(ctx, `
INSERT INTO runtime_placements (runtime_session_id, node, placed_at, confirmed_at)
SELECT $1, n.name, now(), NULL FROM nodes n
WHERE n.name = $2 AND (n.max_runtimes <= 0 OR n.max_runtimes > (
    SELECT COUNT(*) FROM runtime_placements p WHERE p.node = n.name AND p.runtime_session_id <> $1
        AND (p.confirmed_at IS NOT NULL OR p.placed_at > now() - make_interval(secs => $3))))
ON CONFLICT (runtime_session_id) DO UPDATE SET node = excluded.node, placed_at = excluded.placed_at, confirmed_at = NULL`,
			session, out.Node, domain.PlacementPending.Seconds())
		if err != nil {
			return err
		}
		rows, err := res.RowsAffected()
		ok = rows == 1
		return err
	})
	return out, ok, err
}

// choosePlacement runs domain.Place over the nodes as read, with the session's own slot not
// counted. A choice of no node drops the session's earlier slot.
func (q *Q) choosePlacement(ctx context.Context, session uuid.UUID, ask domain.PlacementAsk) (domain.NodePlacement, error) {
	// One clock read for the whole choice: a wake's placement is on every wake's path.
	now, err := q.Now(ctx)
	if err != nil {
		return domain.NodePlacement{}, err
	}
	cutoff := now.Add(-domain.PlacementPending)
	nodes, err := q.listNodesAt(ctx, cutoff)
	if err != nil {
		return domain.NodePlacement{}, err
	}
	own, counted, err := q.ownPlacement(ctx, session, cutoff)
	if err != nil {
		return domain.NodePlacement{}, err
	}
	if counted {
		for i := range nodes {
			if nodes[i].Name == own {
				nodes[i].Runtimes--
			}
		}
	}
	out := domain.Place(nodes, now, ask)
	if out.Node == "" {
		if _, err := q.exec(ctx, `DELETE FROM runtime_placements WHERE runtime_session_id = ?`, session); err != nil {
			return domain.NodePlacement{}, err
		}
	}
	return out, nil
}

// ownPlacement is the node of the session's current slot and whether it counts (confirmed,
// or placed after cutoff); "" when it has none.
func (q *Q) ownPlacement(ctx context.Context, session uuid.UUID, cutoff time.Time) (string, bool, error) {
	var own struct {
		Node      string     `db:"node"`
		PlacedAt  time.Time  `db:"placed_at"`
		Confirmed *time.Time `db:"confirmed_at"`
	}
	err := q.get(ctx, &own, `SELECT node, placed_at, confirmed_at FROM runtime_placements WHERE runtime_session_id = ?`, session)
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return own.Node, own.Confirmed != nil || own.PlacedAt.After(cutoff), nil
}

// takeSlot records the session's unconfirmed slot on node (moving it from another node).
func (q *Q) takeSlot(ctx context.Context, session uuid.UUID, node string) error {
	now, err := q.Now(ctx)
	if err != nil {
		return err
	}
	_, err = q.exec(ctx, `
INSERT INTO runtime_placements (runtime_session_id, node, placed_at, confirmed_at) VALUES (?, ?, ?, NULL)
ON CONFLICT (runtime_session_id) DO UPDATE SET node = excluded.node, placed_at = excluded.placed_at, confirmed_at = NULL`,
		session, node, now)
	return err
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
