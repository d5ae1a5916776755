// The glue that lets `mcp-sim sweep --virtual` run these servers under its virtual clock
// (sim/go/peer). MCP_SIM_SERVER picks go-sdk (the default) or mcp-go; over HTTP,
// MCP_SIM_HTTP_OPTIONS may hold `stateless` and `propagate` (go-sdk's StreamableHTTPOptions),
// as the server's -stateless and -propagate flags. The SDKs' session ids come from the run's
// seed (go-sdk's GetSessionID, google/uuid's SetRand for mcp-go). Outside mcp-sim the test
// skips.
package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	mcpgoserver "github.com/mark3labs/mcp-go/server"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/google/uuid"

	"mcpsim.test/peer"
)

func TestMCPSimVirtual(t *testing.T) {
	mcpGo := os.Getenv("MCP_SIM_SERVER") == "mcp-go"
	options := os.Getenv("MCP_SIM_HTTP_OPTIONS")
	peer.Run(t, peer.Servers{
		Stdio: func(ctx context.Context, in io.Reader, out io.Writer) error {
			if mcpGo {
				return mcpgoserver.NewStdioServer(mcpGoServer()).Listen(ctx, in, out)
			}
			return goSDKServer().Run(ctx, &gosdk.IOTransport{Reader: io.NopCloser(in), Writer: peer.NopCloser(out)})
		},
		HTTP: func() http.Handler {
			if mcpGo {
				uuid.SetRand(peer.Rand()) // its session ids
				return mcpgoserver.NewStreamableHTTPServer(mcpGoServer())
			}
			s := goSDKServerWith(&gosdk.ServerOptions{GetSessionID: peer.Text})
			return gosdk.NewStreamableHTTPHandler(func(*http.Request) *gosdk.Server { return s },
				&gosdk.StreamableHTTPOptions{
					Stateless:                    strings.Contains(options, "stateless"),
					PropagateRequestCancellation: strings.Contains(options, "propagate"),
				})
		},
	})
}
