package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/schema"
)

type nodeRow struct {
	Name        string    `db:"name"`
	Hostname    string    `db:"hostname"`
	PID         int       `db:"pid"`
	Version     string    `db:"version"`
	DataDir     string    `db:"data_dir"`
	StartedAt   time.Time `db:"started_at"`
	HeartbeatAt time.Time `db:"heartbeat_at"`
	Adapters    string    `db:"adapters"`
	MaxRuntimes int       `db:"max_runtimes"`
	Draining    bool      `db:"draining"`
	Runtimes    int       `db:"runtimes"`
	Sandbox     string    `db:"sandbox"`
	CLIs        string    `db:"clis"`
	HostStore   string    `db:"host_store"`
}

func (r nodeRow) domain() domain.Node {
	n := domain.Node{
		Name: r.Name, Hostname: r.Hostname, PID: r.PID, Version: r.Version, DataDir: r.DataDir,
		StartedAt: utc(r.StartedAt), HeartbeatAt: utc(r.HeartbeatAt), MaxRuntimes: r.MaxRuntimes, Draining: r.Draining,
		Runtimes: r.Runtimes, Sandbox: domain.SandboxSupport(r.Sandbox), HostStore: r.HostStore,
	}
	// A row a worker wrote is valid JSON; anything else reads as "runs nothing known".
	_ = json.Unmarshal([]byte(r.Adapters), &n.Adapters)
	if r.CLIs != "" {
		// Likewise; a probe that found nothing is an empty list, not "not probed".
		if json.Unmarshal([]byte(r.CLIs), &n.CLIs) != nil || n.CLIs == nil {
			n.CLIs = []domain.NodeCLI{}
		}
	}
	return n
}

// ErrNodeTaken: another live worker, on another machine or data directory, serves the name.
var ErrNodeTaken = fmt.Errorf("%w: the node name is served by another live worker", ErrConflict)

// Now is the database's clock. Heartbeats are written and aged with it, so workers and API
// servers on machines whose clocks drift still agree on a heartbeat's age. SQLite belongs to
// one process on one machine, whose clock it is.
func (q *Q) Now(ctx context.Context) (time.Time, error) {
	if q.store.dialect != schema.Postgres {
		return domain.Timestamp(time.Now()), nil
	}
	var now time.Time
	if err := q.get(ctx, &now, `SELECT now()`); err != nil {
		return time.Time{}, fmt.Errorf("database clock: %w", err)
	}
	return domain.Timestamp(now), nil
}

// RegisterNode records a node starting under its name, with the database's clock. A row of
// the same name whose heartbeat is fresh and that names another host or data directory
// belongs to a live worker elsewhere: two workers on one node queue would run one machine's
// activities on the other's disk, so that is ErrNodeTaken. The same host and directory is
// this node restarting (its data-directory lock proves the old process is gone).
func (q *Q) RegisterNode(ctx context.Context, n domain.Node) (domain.Node, error) {
	if err := domain.ValidateNodeName(n.Name); err != nil {
		return domain.Node{}, err
	}
	err := q.atomic(ctx, func(q *Q) error {
		now, err := q.Now(ctx)
		if err != nil {
			return err
		}
		cur, err := q.GetNode(ctx, n.Name)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		case now.Sub(cur.HeartbeatAt) < domain.NodeStaleAfter && (cur.Hostname != n.Hostname || cur.DataDir != n.DataDir):
			return fmt.Errorf("%w (host %s, pid %d, data directory %s, heartbeat %s ago)", ErrNodeTaken,
				cur.Hostname, cur.PID, cur.DataDir, now.Sub(cur.HeartbeatAt).Round(time.Second))
		}
		n.StartedAt, n.HeartbeatAt = now, now
		adapters, err := json.Marshal(n.Adapters)
		if err != nil {
			return err
		}
		if n.Adapters == nil {
			adapters = []byte("[]")
		}
		_, err = q.exec(ctx, `
INSERT INTO nodes (name, hostname, pid, version, data_dir, started_at, heartbeat_at, adapters, max_runtimes, sandbox, clis, host_store)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?)
ON CONFLICT (name) DO UPDATE SET hostname = excluded.hostname, pid = excluded.pid,
    version = excluded.version, data_dir = excluded.data_dir, started_at = excluded.started_at,
    heartbeat_at = excluded.heartbeat_at, adapters = excluded.adapters, max_runtimes = excluded.max_runtimes,
    sandbox = excluded.sandbox, clis = excluded.clis, host_store = excluded.host_store`,
			n.Name, n.Hostname, n.PID, n.Version, n.DataDir, n.StartedAt, n.HeartbeatAt, string(adapters), n.MaxRuntimes,
			string(n.Sandbox), n.HostStore)
		return err
	})
	if err != nil {
		return domain.Node{}, fmt.Errorf("register node %s: %w", n.Name, err)
	}
	return n, nil
}

// HeartbeatNode refreshes the heartbeat of the node row this process registered (matched by
// host and pid). ErrNotFound means the row is gone or another worker took the name over.
func (q *Q) HeartbeatNode(ctx context.Context, n domain.Node) error {
	now, err := q.Now(ctx)
	if err != nil {
		return err
	}
	res, err := q.exec(ctx, `UPDATE nodes SET heartbeat_at = ? WHERE name = ? AND hostname = ? AND pid = ?`,
		now, n.Name, n.Hostname, n.PID)
	if err != nil {
		return fmt.Errorf("heartbeat node %s: %w", n.Name, err)
	}
	if rows, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("heartbeat node %s: %w", n.Name, err)
	} else if rows == 0 {
		return fmt.Errorf("heartbeat node %s: %w", n.Name, ErrNotFound)
	}
	return nil
}

// SetNodeSandbox records the node's `sbx` support as last probed (at its worker's start,
// every minute after, or on an operator's probe).
func (q *Q) SetNodeSandbox(ctx context.Context, node string, support domain.SandboxSupport) error {
	res, err := q.exec(ctx, `UPDATE nodes SET sandbox = ? WHERE name = ?`, string(support), node)
	if err != nil {
		return fmt.Errorf("record sandbox support of node %s: %w", node, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("record sandbox support of node %s: %w", node, err)
	} else if n == 0 {
		return fmt.Errorf("record sandbox support of node %s: %w", node, ErrNotFound)
	}
	return nil
}

// SetNodeCLIs records the provider CLIs the node's worker resolved (at its start, or on an
// operator's probe); the row of a worker that registers again reads as not probed until then.
func (q *Q) SetNodeCLIs(ctx context.Context, node string, clis []domain.NodeCLI) error {
	if clis == nil {
		clis = []domain.NodeCLI{}
	}
	b, err := json.Marshal(clis)
	if err != nil {
		return fmt.Errorf("record provider CLIs of node %s: %w", node, err)
	}
	res, err := q.exec(ctx, `UPDATE nodes SET clis = ? WHERE name = ?`, string(b), node)
	if err != nil {
		return fmt.Errorf("record provider CLIs of node %s: %w", node, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("record provider CLIs of node %s: %w", node, err)
	} else if n == 0 {
		return fmt.Errorf("record provider CLIs of node %s: %w", node, ErrNotFound)
	}
	return nil
}

// GetNode reads one node.
func (q *Q) GetNode(ctx context.Context, name string) (domain.Node, error) {
	var r nodeRow
	cutoff, err := q.placementCutoff(ctx)
	if err != nil {
		return domain.Node{}, err
	}
	if err := q.get(ctx, &r, nodeSelect+` WHERE n.name = ?`, cutoff, uuid.Nil, name); err != nil {
		return domain.Node{}, fmt.Errorf("get node %s: %w", name, err)
	}
	return r.domain(), nil
}

// ListNodes lists every node by name.
func (q *Q) ListNodes(ctx context.Context) ([]domain.Node, error) {
	cutoff, err := q.placementCutoff(ctx)
	if err != nil {
		return nil, err
	}
	return q.listNodesAt(ctx, cutoff, uuid.Nil)
}

// listNodesAt lists every node by name, counting placements made after cutoff but for
// session's own.
func (q *Q) listNodesAt(ctx context.Context, cutoff time.Time, session uuid.UUID) ([]domain.Node, error) {
	var rows []nodeRow
	if err := q.selectAll(ctx, &rows, nodeSelect+` ORDER BY n.name`, cutoff, session); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := make([]domain.Node, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}
