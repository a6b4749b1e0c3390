package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

type nodeRow struct {
	Name        string    `db:"name"`
	Hostname    string    `db:"hostname"`
	PID         int       `db:"pid"`
	Version     string    `db:"version"`
	DataDir     string    `db:"data_dir"`
	StartedAt   time.Time `db:"started_at"`
	HeartbeatAt time.Time `db:"heartbeat_at"`
}

func (r nodeRow) domain() domain.Node {
	return domain.Node{
		Name: r.Name, Hostname: r.Hostname, PID: r.PID, Version: r.Version, DataDir: r.DataDir,
		StartedAt: utc(r.StartedAt), HeartbeatAt: utc(r.HeartbeatAt),
	}
}

// RegisterNode records a node starting (or restarting) under its name.
func (q *Q) RegisterNode(ctx context.Context, n domain.Node) error {
	if err := domain.ValidateNodeName(n.Name); err != nil {
		return err
	}
	_, err := q.exec(ctx, `
INSERT INTO nodes (name, hostname, pid, version, data_dir, started_at, heartbeat_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET hostname = excluded.hostname, pid = excluded.pid,
    version = excluded.version, data_dir = excluded.data_dir, started_at = excluded.started_at,
    heartbeat_at = excluded.heartbeat_at`,
		n.Name, n.Hostname, n.PID, n.Version, n.DataDir, domain.Timestamp(n.StartedAt), domain.Timestamp(n.HeartbeatAt))
	if err != nil {
		return fmt.Errorf("register node %s: %w", n.Name, err)
	}
	return nil
}

// HeartbeatNode refreshes a registered node's heartbeat; ErrNotFound means it must register.
func (q *Q) HeartbeatNode(ctx context.Context, name string, at time.Time) error {
	res, err := q.exec(ctx, `UPDATE nodes SET heartbeat_at = ? WHERE name = ?`, domain.Timestamp(at), name)
	if err != nil {
		return fmt.Errorf("heartbeat node %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("heartbeat node %s: %w", name, err)
	} else if n == 0 {
		return fmt.Errorf("heartbeat node %s: %w", name, ErrNotFound)
	}
	return nil
}

// GetNode reads one node.
func (q *Q) GetNode(ctx context.Context, name string) (domain.Node, error) {
	var r nodeRow
	if err := q.get(ctx, &r, `SELECT * FROM nodes WHERE name = ?`, name); err != nil {
		return domain.Node{}, fmt.Errorf("get node %s: %w", name, err)
	}
	return r.domain(), nil
}

// ListNodes lists every node by name.
func (q *Q) ListNodes(ctx context.Context) ([]domain.Node, error) {
	var rows []nodeRow
	if err := q.selectAll(ctx, &rows, `SELECT * FROM nodes ORDER BY name`); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := make([]domain.Node, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}
