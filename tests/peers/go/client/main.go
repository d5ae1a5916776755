// An MCP client built with one of the two Go SDKs, driven against `mcp-sim serve` and
// through `mcp-sim record`.
//
// Usage: client -sdk go-sdk|mcp-go [-era auto|legacy] [-connect-timeout MS] PLAN
//        (-url URL | -- COMMAND ARGS...)
//
// PLAN is a JSON list of calls made one after the other, each
// `{"steps": N, "step_ms": M, "timeout_ms": T, "progress": true}`: a `tools/call` of `slow_op`
// under a context that expires after T ms (neither SDK has a request timeout of its own: the
// caller's context is the per-call timeout), with a progress token when `progress` is true
// (the default). One JSON line per call goes to stdout:
// `{"call": i, "outcome": "result" | "error" | "timeout", "progress": n, "ms": elapsed}`.
// `-era legacy` pins 2025-11-25 (no `server/discover` probe); `auto` is each SDK's default.
// `-connect-timeout MS` gives connecting (the discover probe, the handshake) a context that
// expires after MS ms. When connecting fails the client prints
// `{"connect": "timeout" | "error", "error": text}` and exits 0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

type call struct {
	Steps     int   `json:"steps"`
	StepMs    int   `json:"step_ms"`
	TimeoutMs int   `json:"timeout_ms"`
	Progress  *bool `json:"progress"`
}

// session is what the plan needs of either SDK's client.
type session interface {
	callTool(ctx context.Context, k int, c call) (isError bool, err error)
	close()
}

// progressSeen counts the progress notifications the client's handler was given.
var progressSeen atomic.Int64

func say(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func main() {
	sdk := flag.String("sdk", "go-sdk", "go-sdk or mcp-go")
	era := flag.String("era", "auto", "auto or legacy")
	url := flag.String("url", "", "a Streamable HTTP endpoint instead of a command")
	connectTimeout := flag.Int("connect-timeout", 0, "ms connecting may take (0: no bound)")
	flag.Parse()
	args := flag.Args()
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: client -sdk go-sdk|mcp-go [-era auto|legacy] PLAN (-url URL | -- COMMAND ARGS...)")
		os.Exit(2)
	}
	var plan []call
	if err := json.Unmarshal([]byte(args[0]), &plan); err != nil {
		fmt.Fprintln(os.Stderr, "PLAN:", err)
		os.Exit(2)
	}
	command := args[1:]
	// `--url URL` may also follow the plan (as the other peers' clients take it).
	if len(command) == 2 && (command[0] == "--url" || command[0] == "-url") {
		*url, command = command[1], nil
	}
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	if *url == "" && len(command) == 0 {
		fmt.Fprintln(os.Stderr, "a server command or -url is needed")
		os.Exit(2)
	}
	ctx := context.Background()
	connectCtx, cancelConnect := ctx, context.CancelFunc(func() {})
	if *connectTimeout > 0 {
		connectCtx, cancelConnect = context.WithTimeout(ctx, time.Duration(*connectTimeout)*time.Millisecond)
	}
	var s session
	var err error
	switch *sdk {
	case "go-sdk":
		s, err = connectGoSDK(connectCtx, *era, *url, command)
	case "mcp-go":
		s, err = connectMcpGo(connectCtx, *era, *url, command)
	default:
		fmt.Fprintf(os.Stderr, "unknown -sdk %q\n", *sdk)
		os.Exit(2)
	}
	if err != nil {
		kind := "error"
		if errors.Is(err, context.DeadlineExceeded) || connectCtx.Err() != nil {
			kind = "timeout"
		}
		say(map[string]any{"connect": kind, "error": err.Error()})
		// Whatever the SDK sends on a timeout (a cancel) goes out before the process ends.
		time.Sleep(200 * time.Millisecond)
		cancelConnect()
		return
	}
	cancelConnect()
	for i, c := range plan {
		before := progressSeen.Load()
		started := time.Now()
		callCtx, cancel := context.WithTimeout(ctx, time.Duration(c.TimeoutMs)*time.Millisecond)
		isError, err := s.callTool(callCtx, i, c)
		cancel()
		outcome, text := "result", ""
		switch {
		case err != nil && errors.Is(err, context.DeadlineExceeded):
			outcome, text = "timeout", err.Error()
		case err != nil:
			outcome, text = "error", err.Error()
		case isError:
			outcome = "error"
		}
		say(map[string]any{"call": i, "outcome": outcome, "progress": progressSeen.Load() - before,
			"ms": time.Since(started).Milliseconds(), "error": text})
	}
	s.close()
}

func wantsProgress(c call) bool { return c.Progress == nil || *c.Progress }

type goSDKSession struct{ cs *gosdk.ClientSession }

func connectGoSDK(ctx context.Context, era, url string, command []string) (session, error) {
	client := gosdk.NewClient(&gosdk.Implementation{Name: "mcp-sim-go-sdk-client", Version: "1.0.0"},
		&gosdk.ClientOptions{ProgressNotificationHandler: func(context.Context, *gosdk.ProgressNotificationClientRequest) {
			progressSeen.Add(1)
		}})
	var t gosdk.Transport
	if url != "" {
		t = &gosdk.StreamableClientTransport{Endpoint: url}
	} else {
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Stderr = os.Stderr
		t = &gosdk.CommandTransport{Command: cmd}
	}
	opts := &gosdk.ClientSessionOptions{}
	if era == "legacy" {
		opts.ProtocolVersion = "2025-11-25"
	}
	cs, err := client.Connect(ctx, t, opts)
	if err != nil {
		return nil, err
	}
	return &goSDKSession{cs}, nil
}

func (s *goSDKSession) callTool(ctx context.Context, k int, c call) (bool, error) {
	params := &gosdk.CallToolParams{Name: "slow_op", Arguments: map[string]any{"steps": c.Steps, "step_ms": c.StepMs}}
	if wantsProgress(c) {
		params.SetProgressToken(fmt.Sprintf("go-%d", k))
	}
	res, err := s.cs.CallTool(ctx, params)
	if err != nil {
		return false, err
	}
	return res.IsError, nil
}

func (s *goSDKSession) close() { _ = s.cs.Close() }

type mcpGoSession struct{ c *mcpgoclient.Client }

func connectMcpGo(ctx context.Context, era, url string, command []string) (session, error) {
	var opts []mcpgoclient.ClientOption
	if era == "legacy" {
		opts = append(opts, mcpgoclient.WithProtocolVersion("2025-11-25"))
	}
	var t mcpgotransport.Interface
	var err error
	if url != "" {
		t, err = mcpgotransport.NewStreamableHTTP(url)
		if err != nil {
			return nil, err
		}
	} else {
		t = mcpgotransport.NewStdio(command[0], nil, command[1:]...)
	}
	c := mcpgoclient.NewClient(t, opts...)
	// Start's context bounds the server process's life, not the connecting: only the
	// handshake runs under ctx.
	if err := c.Start(context.Background()); err != nil {
		return nil, err
	}
	c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			progressSeen.Add(1)
		}
	})
	init := mcpgo.InitializeRequest{}
	init.Params.ClientInfo = mcpgo.Implementation{Name: "mcp-sim-mcp-go-client", Version: "1.0.0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		_ = c.Close()
		return nil, err
	}
	return &mcpGoSession{c}, nil
}

func (s *mcpGoSession) callTool(ctx context.Context, k int, c call) (bool, error) {
	req := mcpgo.CallToolRequest{}
	req.Params.Name = "slow_op"
	req.Params.Arguments = map[string]any{"steps": c.Steps, "step_ms": c.StepMs}
	if wantsProgress(c) {
		req.Params.Meta = &mcpgo.Meta{ProgressToken: fmt.Sprintf("go-%d", k)}
	}
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return false, err
	}
	return res.IsError, nil
}

func (s *mcpGoSession) close() { _ = s.c.Close() }
