package domain

import (
	"path"
	"strings"
)

// ThreadKind names the kind of provider thread a configuration runs: its transport and the
// CLI's name. A thread of one kind can never be resumed by a runtime of another (a Codex
// thread id means nothing to Claude Code, nor an OpenCode session to the test agent), so a
// room whose configuration changes kind starts a new thread. The CLI's directory is not
// part of it: the same CLI moved or upgraded resumes its own threads.
func ThreadKind(c TemplateConfig) string {
	cmd := c.Command
	if cmd == "" {
		if row, ok := LookupTransport(c.Transport); ok {
			cmd = row.Command
		}
	}
	return string(c.Transport) + ":" + strings.TrimSuffix(path.Base(cmd), ".exe")
}
