package contract

import (
	"fmt"
	"strings"

	"github.com/jam-dev/jam/internal/domain"
)

// TaskQueue carries every workflow and every activity that needs no particular machine.
const TaskQueue = "jam"

const nodeQueuePrefix = TaskQueue + ".node."

// NodeTaskQueue carries the activities that touch one node's machine.
func NodeTaskQueue(node string) string { return nodeQueuePrefix + node }

// ParseNodeTaskQueue inverts NodeTaskQueue.
func ParseNodeTaskQueue(queue string) (string, error) {
	node, ok := strings.CutPrefix(queue, nodeQueuePrefix)
	if !ok {
		return "", fmt.Errorf("task queue %q is not a node queue", queue)
	}
	if err := domain.ValidateNodeName(node); err != nil {
		return "", fmt.Errorf("task queue %q: %w", queue, err)
	}
	return node, nil
}
