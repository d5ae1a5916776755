// A slow MCP server built with one of the two Go SDKs, for `mcp-sim probe`.
//
// Usage: server -sdk go-sdk|mcp-go [-http ADDR] [-stateless] [-propagate] [-log FILE]
//
// One tool, `slow_op({steps, step_ms})`: it waits `step_ms` ms per step and, when the request
// carried a progress token, reports progress 1..steps of steps after each step. It stops when
// its context is done (a cancel, as each SDK's guide shows) and returns the context's error;
// what goes on the wire then is the SDK's doing. Each stop is logged (`slow_op stopped after
// K of N steps`) to stderr, or appended to FILE with -log: a handler that runs on after its
// client went away is invisible on the wire, and this is its own account.
//
// Without -http it serves stdio. With -http it serves Streamable HTTP on ADDR at /mcp and
// prints `listening on http://ADDR/mcp` to stderr. go-sdk serves 2026-07-28 over HTTP only
// with -stateless (`StreamableHTTPOptions.Stateless`), and a closed stream cancels a handler
// only with -propagate (`PropagateRequestCancellation`, off by default).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"io"
	"net/http"
	"os"
	"time"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
)

// stops is where each handler's stop is told.
var stops io.Writer = os.Stderr

// step waits one step, or returns the context's error when it is done first.
func step(ctx context.Context, ms int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(ms) * time.Millisecond):
		return nil
	}
}

type slowIn struct {
	Steps  int `json:"steps"`
	StepMs int `json:"step_ms"`
}

func goSDKServer() *gosdk.Server { return goSDKServerWith(nil) }

// goSDKServerWith makes the server with these options (the virtual-peer glue's seeded session
// ids).
func goSDKServerWith(opts *gosdk.ServerOptions) *gosdk.Server {
	s := gosdk.NewServer(&gosdk.Implementation{Name: "go-sdk-slow", Version: "1.0.0"}, opts)
	gosdk.AddTool(s, &gosdk.Tool{Name: "slow_op", Description: "Wait step_ms ms per step for steps steps, reporting progress after each"},
		func(ctx context.Context, req *gosdk.CallToolRequest, in slowIn) (*gosdk.CallToolResult, any, error) {
			token := req.Params.GetProgressToken()
			for i := 1; i <= in.Steps; i++ {
				if err := step(ctx, in.StepMs); err != nil {
					fmt.Fprintf(stops, "slow_op stopped after %d of %d steps\n", i-1, in.Steps)
					return nil, nil, err
				}
				if token != nil {
					_ = req.Session.NotifyProgress(ctx, &gosdk.ProgressNotificationParams{
						ProgressToken: token, Progress: float64(i), Total: float64(in.Steps),
					})
				}
			}
			text := fmt.Sprintf("done %d of %d steps", in.Steps, in.Steps)
			return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: text}}}, nil, nil
		})
	return s
}

func mcpGoServer() *mcpgoserver.MCPServer {
	s := mcpgoserver.NewMCPServer("mcp-go-slow", "1.0.0", mcpgoserver.WithToolCapabilities(false))
	tool := mcpgo.NewTool("slow_op",
		mcpgo.WithDescription("Wait step_ms ms per step for steps steps, reporting progress after each"),
		mcpgo.WithNumber("steps"), mcpgo.WithNumber("step_ms"))
	s.AddTool(tool, func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		var token mcpgo.ProgressToken
		if req.Params.Meta != nil {
			token = req.Params.Meta.ProgressToken
		}
		steps := int(req.GetFloat("steps", 5))
		stepMs := int(req.GetFloat("step_ms", 200))
		for i := 1; i <= steps; i++ {
			if err := step(ctx, stepMs); err != nil {
				fmt.Fprintf(stops, "slow_op stopped after %d of %d steps\n", i-1, steps)
				return nil, err
			}
			if token != nil {
				_ = mcpgoserver.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress",
					map[string]any{"progressToken": token, "progress": i, "total": steps})
			}
		}
		return mcpgo.NewToolResultText(fmt.Sprintf("done %d of %d steps", steps, steps)), nil
	})
	return s
}

func main() {
	sdk := flag.String("sdk", "go-sdk", "go-sdk or mcp-go")
	addr := flag.String("http", "", "serve Streamable HTTP on this address instead of stdio")
	stateless := flag.Bool("stateless", false, "go-sdk: StreamableHTTPOptions.Stateless (2026-07-28 over HTTP)")
	propagate := flag.Bool("propagate", false, "go-sdk: StreamableHTTPOptions.PropagateRequestCancellation")
	logTo := flag.String("log", "", "append each handler's stop to this file instead of stderr")
	flag.Parse()
	if *logTo != "" {
		f, err := os.OpenFile(*logTo, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		stops = f
	}
	ctx := context.Background()
	switch {
	case *sdk == "go-sdk" && *addr == "":
		if err := goSDKServer().Run(ctx, &gosdk.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
	case *sdk == "go-sdk":
		s := goSDKServer()
		handler := gosdk.NewStreamableHTTPHandler(func(*http.Request) *gosdk.Server { return s },
			&gosdk.StreamableHTTPOptions{Stateless: *stateless, PropagateRequestCancellation: *propagate})
		serveHTTP(*addr, handler)
	case *sdk == "mcp-go" && *addr == "":
		if err := mcpgoserver.ServeStdio(mcpGoServer()); err != nil {
			log.Fatal(err)
		}
	case *sdk == "mcp-go":
		serveHTTP(*addr, mcpgoserver.NewStreamableHTTPServer(mcpGoServer()))
	default:
		log.Fatalf("unknown -sdk %q: go-sdk or mcp-go", *sdk)
	}
}

// serveHTTP serves handler at /mcp on addr and says where on stderr.
func serveHTTP(addr string, handler http.Handler) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	fmt.Fprintf(os.Stderr, "listening on http://%s/mcp\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
