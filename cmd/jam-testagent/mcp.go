package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/coder/acp-go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServer is one MCP server the client gave a session (session/new, load or resume).
type mcpServer struct {
	name    string
	url     string
	headers map[string]string
	command string
	args    []string
	env     []string
}

func mcpServersOf(in []acp.McpServer) []mcpServer {
	var out []mcpServer
	for _, s := range in {
		switch {
		case s.Http != nil:
			h := map[string]string{}
			for _, kv := range s.Http.Headers {
				h[kv.Name] = kv.Value
			}
			out = append(out, mcpServer{name: s.Http.Name, url: s.Http.Url, headers: h})
		case s.Stdio != nil:
			var env []string
			for _, kv := range s.Stdio.Env {
				env = append(env, kv.Name+"="+kv.Value)
			}
			out = append(out, mcpServer{name: s.Stdio.Name, command: s.Stdio.Command, args: s.Stdio.Args, env: env})
		}
	}
	return out
}

// headerTransport adds the server's configured headers to every request.
type headerTransport struct{ headers map[string]string }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// callTool calls name on the first of the session's MCP servers that offers it, as a
// model-driven agent would. callID, when set, goes in the call's _meta so a retry is
// recognisable. It returns the tool's text and whether the tool reported an error.
func (a *agent) callTool(ctx context.Context, servers []mcpServer, name string, args map[string]any, callID string) (string, bool, error) {
	if len(servers) == 0 {
		return "", false, fmt.Errorf("the session has no MCP servers")
	}
	for _, s := range servers {
		var tr mcp.Transport
		if s.url != "" {
			tr = &mcp.StreamableClientTransport{Endpoint: s.url, MaxRetries: -1, HTTPClient: &http.Client{Transport: headerTransport{s.headers}}}
		} else {
			cmd := exec.Command(s.command, s.args...)
			cmd.Env = append(os.Environ(), s.env...)
			tr = &mcp.CommandTransport{Command: cmd}
		}
		c := mcp.NewClient(&mcp.Implementation{Name: defaultName, Version: version}, nil)
		cs, err := c.Connect(ctx, tr, nil)
		if err != nil {
			return "", false, fmt.Errorf("connect to MCP server %s: %w", s.name, err)
		}
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			_ = cs.Close()
			return "", false, fmt.Errorf("list tools of %s: %w", s.name, err)
		}
		offered := false
		for _, t := range list.Tools {
			offered = offered || t.Name == name
		}
		if !offered {
			_ = cs.Close()
			continue
		}
		p := &mcp.CallToolParams{Name: name, Arguments: args}
		if callID != "" {
			p.Meta = mcp.Meta{"jam/call_id": callID}
		}
		res, err := cs.CallTool(ctx, p)
		_ = cs.Close()
		if err != nil {
			return "", false, fmt.Errorf("call %s: %w", name, err)
		}
		var parts []string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				parts = append(parts, t.Text)
			}
		}
		return strings.Join(parts, "\n"), res.IsError, nil
	}
	return "", false, fmt.Errorf("no MCP server offers %s", name)
}

var messageHeader = regexp.MustCompile(`(?m)^\[message \d+ of \d+\] id=([0-9a-fA-F-]{36}) `)

// lastMessageID is the id of the last message block of a Jam envelope ("" when none).
func lastMessageID(text string) string {
	m := messageHeader.FindAllStringSubmatch(text, -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

// toolCall is one [[...-tool]] directive.
type toolCall struct {
	kind string // reply, noreply, send, context, ask, retry, retry-reply, call
	arg  string
}

// runTools plays the tool directives in order and returns what the turn says about them
// and whether the turn settled its message itself (then it says nothing more).
func (a *agent) runTools(ctx context.Context, servers []mcpServer, calls []toolCall, prompt, body string) (parts []string, settled bool, err error) {
	msg := lastMessageID(prompt)
	for i, c := range calls {
		var (
			text  string
			isErr bool
		)
		switch c.kind {
		case "reply":
			reply := c.arg
			if reply == "" {
				reply = "echo: " + body
			}
			text, isErr, err = a.callTool(ctx, servers, "jam_reply_to_message", map[string]any{"message_id": msg, "text": reply}, "")
			settled = settled || !isErr
		case "noreply":
			text, isErr, err = a.callTool(ctx, servers, "jam_no_reply", map[string]any{"message_id": msg, "reason": "scripted"}, "")
			settled = settled || !isErr
		case "send":
			text, isErr, err = a.callTool(ctx, servers, "jam_send_message", map[string]any{"text": c.arg}, "")
		case "context":
			text, isErr, err = a.callTool(ctx, servers, "jam_room_context", map[string]any{}, "")
		case "ask":
			text, isErr, err = a.callTool(ctx, servers, "jam_ask_question", map[string]any{"question": c.arg}, "")
			text = "answer: " + text
		case "call":
			// [[call-tool NAME {json args}]]: any tool Jam offers, by name.
			name, raw, _ := strings.Cut(strings.TrimSpace(c.arg), " ")
			var args map[string]any
			if jerr := json.Unmarshal([]byte(raw), &args); jerr != nil {
				return nil, false, fmt.Errorf("call-tool %s: arguments: %w", name, jerr)
			}
			text, isErr, err = a.callTool(ctx, servers, name, args, "")
		case "retry-reply":
			// One reply delivered twice under one call id, as a client that lost the first
			// answer retries it: Jam stages it once.
			reply := c.arg
			if reply == "" {
				reply = "echo: " + body
			}
			id := fmt.Sprintf("call-%d-%s", i, msg)
			args := map[string]any{"message_id": msg, "text": reply}
			var first string
			first, isErr, err = a.callTool(ctx, servers, "jam_reply_to_message", args, id)
			if err == nil && !isErr {
				text, isErr, err = a.callTool(ctx, servers, "jam_reply_to_message", args, id)
				text = "first: " + first + " | retry: " + text
			}
			settled = settled || (err == nil && !isErr)
		case "retry":
			id := fmt.Sprintf("call-%d-%s", i, msg)
			var first string
			first, isErr, err = a.callTool(ctx, servers, "jam_send_message", map[string]any{"text": c.arg}, id)
			if err == nil {
				text, isErr, err = a.callTool(ctx, servers, "jam_send_message", map[string]any{"text": c.arg}, id)
				text = "first: " + first + " | retry: " + text
			}
		}
		if err != nil {
			return nil, false, err
		}
		if isErr {
			text = "tool error: " + text
		}
		parts = append(parts, text)
	}
	return parts, settled, nil
}

// saveMCPServers writes the session's MCP servers (URLs, headers, commands) to
// <state dir>/mcp-<session>.json, mode 0600, so a test can call Jam's endpoint as this session.
func (a *agent) saveMCPServers(sid acp.SessionId) error {
	type saved struct {
		Name    string            `json:"name"`
		URL     string            `json:"url,omitempty"`
		Headers map[string]string `json:"headers,omitempty"`
		Command string            `json:"command,omitempty"`
		Args    []string          `json:"args,omitempty"`
	}
	var out []saved
	for _, s := range a.mcpServers(sid) {
		out = append(out, saved{Name: s.name, URL: s.url, Headers: s.headers, Command: s.command, Args: s.args})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	if !validSessionID(string(sid)) {
		return fmt.Errorf("invalid session id %q", sid)
	}
	return os.WriteFile(filepath.Join(filepath.Dir(a.store.dir), "mcp-"+string(sid)+".json"), b, 0o600)
}
