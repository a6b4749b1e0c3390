package tools

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bridge serves Jam's MCP endpoint at url to one stdio MCP client (`jam mcp`): it lists the
// runtime's tools once with its token and forwards every call, so a provider that takes
// only stdio MCP servers reaches the same registry with the same authority.
func Bridge(ctx context.Context, url, token string, in io.ReadCloser, out io.WriteCloser) error {
	client := mcp.NewClient(implementation, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}}, nil)
	if err != nil {
		return fmt.Errorf("connect to Jam's tools at %s: %w", url, err)
	}
	defer func() { _ = cs.Close() }()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list Jam's tools: %w", err)
	}
	srv := mcp.NewServer(implementation, nil)
	for _, t := range list.Tools {
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return cs.CallTool(ctx, &mcp.CallToolParams{Meta: req.Params.Meta, Name: req.Params.Name, Arguments: req.Params.Arguments})
		})
	}
	return srv.Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
}

// bearer adds the runtime's token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// BridgeTokenEnv is the variable `jam mcp` reads its runtime token from: the token stays
// out of argument lists (which every local user can read).
const BridgeTokenEnv = "JAM_MCP_TOKEN"
