// Package activities holds every side effect Jam's workflows perform, grouped into structs
// by the dependencies they need. Activities are idempotent under their operation id.
package activities

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/store"
	"golang.org/x/sys/unix"
)

// Node holds the activities about the machine a node worker runs on. It is registered only
// on that node's task queue, so a result proves the node's worker is serving.
type Node struct {
	Name      string
	DataDir   string
	Version   string
	StartedAt time.Time
	Store     *store.Store
	// Env is the worker's environment snapshot, from which a host-native runtime's is built.
	Env []string
	// Adapters are the provider families the node runs.
	Adapters []domain.Provider
	// Groups records the process groups of CLI probes while they run (nil records none).
	Groups provider.GroupRecorder
}

// DescribeNodeInput is empty; the node is chosen by the task queue.
type DescribeNodeInput struct{}

// DescribeNode reports the node's process, the free space of its data directory and its
// provider CLIs, probed again now and recorded for placement (the on-demand probe).
func (n *Node) DescribeNode(ctx context.Context, _ DescribeNodeInput) (contract.NodeReport, error) {
	host, err := os.Hostname()
	if err != nil {
		return contract.NodeReport{}, fmt.Errorf("node %s hostname: %w", n.Name, err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(n.DataDir, &fs); err != nil {
		return contract.NodeReport{}, fmt.Errorf("node %s data directory %s: %w", n.Name, n.DataDir, err)
	}
	// The node answers about its machine even when its CLIs do not all answer in time.
	pctx, cancel := context.WithTimeout(ctx, describeCLIBudget)
	clis, err := n.ProbeCLIs(pctx)
	cancel()
	unanswered := ""
	if err != nil {
		unanswered = fmt.Sprintf("the provider CLIs were not all resolved within %s (%v); what the node recorded before stands",
			describeCLIBudget, err)
	}
	return contract.NodeReport{
		CLIs: clis, CLIsUnanswered: unanswered, Node: n.Name, Hostname: host, PID: os.Getpid(), Version: n.Version, GoVersion: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH, DataDir: n.DataDir,
		DataDirFreeBytes: fs.Bavail * uint64(fs.Bsize), StartedAt: n.StartedAt.UTC(), ReportedAt: time.Now().UTC(),
	}, nil
}
