package workers

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// architectureWorkflowNames are the workflow names docs/architecture.md's §4 table lists: the
// backticked names in the first cell of each row of the section's tables.
func architectureWorkflowNames(t *testing.T, doc string) []string {
	t.Helper()
	start := strings.Index(doc, "\n## 4. ")
	if start < 0 {
		t.Fatal("docs/architecture.md has no section \"## 4. \" (the workflows)")
	}
	section := doc[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	backticked := regexp.MustCompile("`([A-Za-z]+)`")
	var names []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(strings.TrimSpace(line), "|") || len(cells) < 3 {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// Every workflow type a worker registers is documented: a new workflow that is not added to
// docs/architecture.md's §4 table fails here, naming it.
func TestEveryRegisteredWorkflowIsInTheArchitectureTable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "architecture.md"))
	if err != nil {
		t.Fatalf("read the architecture document: %v", err)
	}
	documented := architectureWorkflowNames(t, string(raw))
	if len(documented) == 0 {
		t.Fatal("docs/architecture.md §4 has no table rows naming workflows")
	}
	var missing []string
	for name := range Workflows() {
		if !slices.Contains(documented, name) {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("registered workflow types missing from docs/architecture.md §4's table "+
			"(add a row: | `Name` | `Name:<key>` | kind |): %s", strings.Join(missing, ", "))
	}
}
