// The glue that lets `mcp-sim sweep --virtual` run these servers under its virtual clock
// (sim/go/peer): MCP_SIM_SERVER picks go-sdk (the default) or mcp-go. Outside mcp-sim the test
// skips.
package main

import (
	"context"
	"io"
	"os"
	"testing"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"

	"mcpsim.test/peer"
)

func TestMCPSimVirtual(t *testing.T) {
	peer.Serve(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		if os.Getenv("MCP_SIM_SERVER") == "mcp-go" {
			return mcpgoserver.NewStdioServer(mcpGoServer()).Listen(ctx, in, out)
		}
		return goSDKServer().Run(ctx, &gosdk.IOTransport{Reader: io.NopCloser(in), Writer: peer.NopCloser(out)})
	})
}
