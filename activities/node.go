// Package activities holds every side effect Jam's workflows perform, grouped into structs
// by the dependencies they need. Activities are idempotent under their operation id.
package activities

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Node holds the activities about the machine a node worker runs on. It is registered only
// on that node's task queue, so a result proves the node's worker is serving.
type Node struct {
	Name      string
	DataDir   string
	Version   string
	StartedAt time.Time
}

// DescribeNodeInput is empty; the node is chosen by the task queue.
type DescribeNodeInput struct{}

// NodeReport is what a node says about itself.
type NodeReport struct {
	Node             string    `json:"node"`
	Hostname         string    `json:"hostname"`
	PID              int       `json:"pid"`
	Version          string    `json:"version"`
	GoVersion        string    `json:"go_version"`
	OS               string    `json:"os"`
	Arch             string    `json:"arch"`
	DataDir          string    `json:"data_dir"`
	DataDirFreeBytes uint64    `json:"data_dir_free_bytes"`
	StartedAt        time.Time `json:"started_at"`
	ReportedAt       time.Time `json:"reported_at"`
}

// DescribeNode reports the node's process and the free space of its data directory.
func (n *Node) DescribeNode(ctx context.Context, _ DescribeNodeInput) (NodeReport, error) {
	host, err := os.Hostname()
	if err != nil {
		return NodeReport{}, fmt.Errorf("node %s hostname: %w", n.Name, err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(n.DataDir, &fs); err != nil {
		return NodeReport{}, fmt.Errorf("node %s data directory %s: %w", n.Name, n.DataDir, err)
	}
	return NodeReport{
		Node: n.Name, Hostname: host, PID: os.Getpid(), Version: n.Version, GoVersion: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH, DataDir: n.DataDir,
		DataDirFreeBytes: fs.Bavail * uint64(fs.Bsize), StartedAt: n.StartedAt.UTC(), ReportedAt: time.Now().UTC(),
	}, nil
}
