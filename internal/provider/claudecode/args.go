package claudecode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// roomRules tell Claude how it works in a room; each turn's envelope says how to settle
// that turn's messages.
const roomRules = `## Working in a Jam room
You are an agent in a chat room, run by Jam. Each turn brings one or more room messages, each in a block with its id and author; messages that arrive while you work join your turn. Answer messages from other agents only when they need an answer, so agents do not talk in circles.`

// toolRules name Jam's tools as Claude lists them (an MCP server's tools are prefixed).
const toolRules = `Jam's tools are the MCP server "%[1]s" (listed as mcp__%[1]s__<name>): jam_reply_to_message {message_id, text} posts your answer to the room as a reply to that message; jam_no_reply {message_id, reason} settles a message without an answer; jam_send_message {text} posts a new room message; jam_room_context reads the room (participants with ids, recent messages); jam_ask_question {question, recipient_id?} asks a human and waits for the answer. Only these tools reach the room.`

// File names in the session's config directory.
const (
	systemPromptFile = "jam-system-prompt.md"
	toolConfigPrefix = "jam-mcp-"
)

// argv is claude's argument list: the operator's extra arguments, then the flags Jam owns
// (the stream-json protocol, permissions over stdio, the model and permission mode of the
// template, Jam's tools and instructions, and the session: --resume of the bound one or
// --session-id of a new one, each in the one-token form so an id can never read as a flag).
func (r *Runtime) argv(session string, resume bool) ([]string, error) {
	row, _ := domain.LookupTransport(r.Spec.Transport)
	for _, a := range r.Spec.Args {
		if flag, _, _ := strings.Cut(a, "="); slices.Contains(row.ReservedArgs, flag) {
			return nil, fmt.Errorf("%w: claude argument %s is set by Jam", provider.ErrInvalidSpec, flag)
		}
	}
	args := slices.Clone(r.Spec.Args)
	args = append(args, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		// Replayed user lines tell Jam when Claude took each steered message; partial
		// messages stream the text as it is written.
		"--replay-user-messages", "--include-partial-messages",
		"--permission-prompt-tool", "stdio")
	set := r.Spec.Settings
	if m := set[domain.SettingKeyModel]; m != "" {
		args = append(args, "--model="+m)
	}
	if m := set[domain.SettingKeyPermissionMode]; m != "" {
		args = append(args, "--permission-mode="+m)
	}
	if e := r.Spec.MCP; e != nil {
		path, err := r.writeToolConfig(e)
		if err != nil {
			return nil, err
		}
		args = append(args, "--mcp-config", path, "--strict-mcp-config")
		if names := r.toolNames(); len(names) > 0 {
			// Jam's own tools never wait for a permission decision.
			args = append(args, "--allowedTools="+strings.Join(names, ","))
		}
	}
	prompt, err := r.writeSystemPrompt()
	if err != nil {
		return nil, err
	}
	args = append(args, "--append-system-prompt-file", prompt)
	if resume {
		args = append(args, "--resume="+session)
	} else {
		args = append(args, "--session-id="+session)
	}
	return args, nil
}

// toolNames are Jam's tools as Claude names them.
func (r *Runtime) toolNames() []string {
	if r.Spec.Tools == nil || r.Spec.MCP == nil {
		return nil
	}
	var out []string
	for _, s := range r.Spec.Tools.Specs() {
		out = append(out, toolPrefix(r.Spec.MCP.Name)+s.Name)
	}
	return out
}

// toolPrefix is how Claude prefixes an MCP server's tools.
func toolPrefix(server string) string { return "mcp__" + server + "__" }

// writeToolConfig writes the --mcp-config naming Jam's endpoint with this instance's
// token, private to the session (0600); it is removed at teardown.
func (r *Runtime) writeToolConfig(e *provider.MCPEndpoint) (string, error) {
	cfg := map[string]any{"mcpServers": map[string]any{e.Name: map[string]any{
		"type": "http", "url": e.URL, "headers": e.Headers()}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := r.toolConfigPath()
	if err := writePrivate(path, b); err != nil {
		return "", fmt.Errorf("claude MCP configuration: %w", err)
	}
	return path, nil
}

func (r *Runtime) toolConfigPath() string {
	return filepath.Join(r.configDir, fmt.Sprintf("%sg%d.json", toolConfigPrefix, r.Spec.Generation))
}

// writeSystemPrompt writes what --append-system-prompt-file adds to Claude's system
// prompt: the operator's briefing and the room, how to work in it, and Jam's tools.
func (r *Runtime) writeSystemPrompt() (string, error) {
	var b strings.Builder
	if pre := strings.TrimSpace(provider.Preamble(r.Spec.Briefing, r.Spec.Roster)); pre != "" {
		b.WriteString(pre)
		b.WriteString("\n\n")
	}
	b.WriteString(roomRules)
	if r.Spec.MCP != nil {
		b.WriteString("\n")
		fmt.Fprintf(&b, toolRules, r.Spec.MCP.Name)
	}
	b.WriteString("\n")
	path := filepath.Join(r.configDir, systemPromptFile)
	if err := writePrivate(path, []byte(b.String())); err != nil {
		return "", fmt.Errorf("claude system prompt: %w", err)
	}
	return path, nil
}

// writePrivate replaces path with data, readable only by Jam's user, atomically.
func writePrivate(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".jam-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
