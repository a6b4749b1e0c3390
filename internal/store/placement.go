package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/schema"
)

// nodeSelect reads nodes with their placed runtimes: confirmed placements, and unconfirmed
// ones younger than domain.PlacementPending (its first argument is that cutoff), but for one
// runtime session's (its second; uuid.Nil counts every one). A wake reads the nodes without
// its own slot in the same statement, so no slot of its own can be counted or missed between.
const nodeSelect = `
SELECT n.*, (SELECT COUNT(*) FROM runtime_placements p WHERE p.node = n.name
    AND (p.confirmed_at IS NOT NULL OR p.placed_at > ?) AND p.runtime_session_id <> ?) AS runtimes
FROM nodes n`

func (q *Q) placementCutoff(ctx context.Context) (time.Time, error) {
	now, err := q.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(-domain.PlacementPending), nil
}

// placeAttempts bounds how often a placement chooses again because the node it chose no
// longer fit once it held that node's lock, before it takes the exclusive path.
const placeAttempts = 4

// PlaceRuntime chooses a node for the session's runtime (domain.Place, the session's own
// earlier placement not counted) and takes a slot there; two wakes at once never both take
// a node's last slot, and wakes at once spread as if placed one at a time. A placement that
// names no node takes nothing and drops the session's earlier one.
//
// On Postgres the node is chosen from a plain read, then checked again under that node's own
// lock (NodeScope), where its slots cannot change (domain.StillPlaces): when it still fits
// the slot is taken, else (other wakes took slots meanwhile) the wake chooses again.
// Placements on different nodes, and every room's posts, run side by side instead of behind
// one exclusive writer (issue 25). SQLite has one writer, so there it is one exclusive
// transaction.
func (s *Store) PlaceRuntime(ctx context.Context, session uuid.UUID, ask domain.PlacementAsk) (domain.NodePlacement, error) {
	if ask.Movable && ask.Previous != "" {
		// The store its host root is in, and whether a runtime confirmed on its node and
		// never released may still run there.
		var own struct {
			Store   string `db:"host_store"`
			Running int    `db:"running"`
		}
		if err := s.get(ctx, &own, `SELECT r.host_store, (SELECT COUNT(*) FROM runtime_placements p
  WHERE p.runtime_session_id = r.id AND p.node = ? AND p.confirmed_at IS NOT NULL) AS running
FROM runtime_sessions r WHERE r.id = ?`, ask.Previous, session); err != nil && !errors.Is(err, ErrNotFound) {
			return domain.NodePlacement{}, fmt.Errorf("place runtime of %s: %w", session, err)
		}
		ask.HostStore, ask.Running = own.Store, own.Running > 0
	}
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
		out, err = q.placeChosen(ctx, session, ask)
		return err
	})
	if err != nil {
		return domain.NodePlacement{}, fmt.Errorf("place runtime of %s: %w", session, err)
	}
	return out, nil
}

// placeOnChosenNode chooses from a plain read, then under the chosen node's lock takes the
// slot if the node still fits. ok is false when it did not.
func (s *Store) placeOnChosenNode(ctx context.Context, session uuid.UUID, ask domain.PlacementAsk) (domain.NodePlacement, bool, error) {
	nodes, now, err := s.readNodes(ctx, session)
	if err != nil {
		return domain.NodePlacement{}, false, err
	}
	out := domain.Place(nodes, now, ask)
	if out.Node == "" {
		return out, true, s.dropPlacement(ctx, session)
	}
	// Wakes at once read the same counts: each takes one of the nodes that fit about as well
	// as the best, at random, so they spread instead of all queueing on one node's lock.
	var fit []string
	for _, n := range nodes {
		if domain.StillPlaces(nodes, now, ask, n.Name) {
			fit = append(fit, n.Name)
		}
	}
	if len(fit) > 1 {
		out.Node = fit[rand.IntN(len(fit))]
	}
	ok := false
	err = s.InScopedTx(ctx, NodeScope(out.Node), func(q *Q) error {
		// Every placement on the node holds this lock, so its slots read now stay as read
		// until commit; other nodes' may have changed, which can move the choice.
		nodes, now, err := q.readNodes(ctx, session)
		if err != nil || !domain.StillPlaces(nodes, now, ask, out.Node) {
			return err
		}
		ok = true
		return q.takeSlot(ctx, session, out.Node, now)
	})
	return out, ok, err
}

// placeChosen chooses and takes the slot (or drops the session's slot when no node took
// it), in the caller's exclusive transaction.
func (q *Q) placeChosen(ctx context.Context, session uuid.UUID, ask domain.PlacementAsk) (domain.NodePlacement, error) {
	out, now, err := q.choosePlacement(ctx, session, ask)
	switch {
	case err != nil:
		return out, err
	case out.Node == "":
		return out, q.dropPlacement(ctx, session)
	}
	return out, q.takeSlot(ctx, session, out.Node, now)
}

// choosePlacement runs domain.Place over the nodes as read (readNodes) and returns the
// database's now it read them at. It writes nothing.
func (q *Q) choosePlacement(ctx context.Context, session uuid.UUID, ask domain.PlacementAsk) (domain.NodePlacement, time.Time, error) {
	nodes, now, err := q.readNodes(ctx, session)
	if err != nil {
		return domain.NodePlacement{}, now, err
	}
	return domain.Place(nodes, now, ask), now, nil
}

// readNodes reads the nodes with their slots, the session's own not counted, at the
// database's now (one clock read: a placement is on every wake's path).
func (q *Q) readNodes(ctx context.Context, session uuid.UUID) ([]domain.Node, time.Time, error) {
	now, err := q.Now(ctx)
	if err != nil {
		return nil, now, err
	}
	nodes, err := q.listNodesAt(ctx, now.Add(-domain.PlacementPending), session)
	return nodes, now, err
}

// dropPlacement frees the session's slot: its wake found no node.
func (q *Q) dropPlacement(ctx context.Context, session uuid.UUID) error {
	_, err := q.exec(ctx, `DELETE FROM runtime_placements WHERE runtime_session_id = ?`, session)
	return err
}

// takeSlot records the session's unconfirmed slot on node (moving it from another node).
func (q *Q) takeSlot(ctx context.Context, session uuid.UUID, node string, now time.Time) error {
	_, err := q.exec(ctx, `
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
	confirm := func(q *Q) error {
		if _, err := q.exec(ctx, `
INSERT INTO runtime_placements (runtime_session_id, node, placed_at, confirmed_at) VALUES (?, ?, ?, ?)
ON CONFLICT (runtime_session_id) DO UPDATE SET node = excluded.node, confirmed_at = excluded.confirmed_at`,
			session, node, now, now); err != nil {
			return err
		}
		// Where its host root now is: nodes reaching that store may take the room later.
		_, err := q.exec(ctx, `UPDATE runtime_sessions SET host_store = COALESCE((SELECT host_store FROM nodes WHERE name = ?), '')
WHERE id = ?`, node, session)
		return err
	}
	// Under the node's own lock, as every write of its slots (not the exclusive writer lock).
	if q.inTx {
		err = confirm(q)
	} else {
		err = q.store.InScopedTx(ctx, NodeScope(node), confirm)
	}
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

// ClearNodePlacements frees every slot on node taken before its worker started (at
// started, the database's clock): that worker starts with no runtime. A wake placed on the
// node since it registered keeps its slot.
func (q *Q) ClearNodePlacements(ctx context.Context, node string, started time.Time) error {
	if _, err := q.exec(ctx, `DELETE FROM runtime_placements WHERE node = ? AND placed_at < ?`, node, started); err != nil {
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

// NodeRuntime is one started runtime's placement.
type NodeRuntime struct {
	RuntimeSession uuid.UUID `db:"runtime_session_id"`
	Node           string    `db:"node"`
	// HostStore is the store the session's host root is in (as recorded when it started).
	HostStore string `db:"host_store"`
}

// RuntimesOnDrainingNodes lists up to limit started runtimes placed on those of nodes that
// are draining (the ones Reconcile may move to a node sharing their host store).
func (q *Q) RuntimesOnDrainingNodes(ctx context.Context, nodes []string, limit int) ([]NodeRuntime, error) {
	var out []NodeRuntime
	if len(nodes) == 0 {
		return out, nil
	}
	query, args, err := sqlx.In(`
SELECT p.runtime_session_id, p.node, r.host_store FROM runtime_placements p JOIN nodes n ON n.name = p.node
  JOIN runtime_sessions r ON r.id = p.runtime_session_id
WHERE n.draining AND p.confirmed_at IS NOT NULL AND p.node IN (?)
ORDER BY p.runtime_session_id LIMIT ?`, nodes, limit)
	if err != nil {
		return nil, fmt.Errorf("runtimes on draining nodes: %w", err)
	}
	if err := q.selectAll(ctx, &out, query, args...); err != nil {
		return nil, fmt.Errorf("runtimes on draining nodes: %w", err)
	}
	return out, nil
}

// PlacedBefore lists the runtime sessions holding a slot on node taken before when (a
// restarted worker's predecessor's runtimes, started or being started), before
// ClearNodePlacements frees them.
func (q *Q) PlacedBefore(ctx context.Context, node string, when time.Time) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	if err := q.selectAll(ctx, &ids, `SELECT runtime_session_id FROM runtime_placements WHERE node = ? AND placed_at < ?
ORDER BY runtime_session_id`, node, when); err != nil {
		return nil, fmt.Errorf("placements of %s: %w", node, err)
	}
	return ids, nil
}
