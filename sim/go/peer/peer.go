// Package peer runs a Go MCP server under mcp-sim's virtual clock: `mcp-sim sweep --virtual`
// and `replay --virtual` drive it through a test of the server's own module.
//
// A server's module adds this package (a `require` and a `replace` naming this folder) and one
// test:
//
//	func TestMCPSimVirtual(t *testing.T) {
//		peer.Serve(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
//			return newServer().Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: peer.NopCloser(out)})
//		})
//	}
//
// and mcp-sim runs it: `mcp-sim sweep --virtual -- go test ./cmd/server -run TestMCPSimVirtual`.
// Outside mcp-sim (no MCP_SIM_VIRTUAL_PEER in the environment) the test skips.
//
// # How
//
// Each run is a fresh test process whose server runs inside a testing/synctest bubble: its
// goroutines, timers and clock are the bubble's, and the bubble's clock moves only when every
// goroutine in it is durably blocked, which is the quiescence mcp-sim's control protocol asks
// for (synctest.Wait). The control protocol (sim/python/mcp_sim/virtual_peer.py documents it)
// goes over the process's stdin and stdout; the server's stdio is a pair of in-memory pipes.
//
// A bubble has no way to show its next timer. So on `advance` the peer runs ahead: its clock
// moves to the target, or stops at the first write of the server before it, whichever comes
// first, and the report says where it stopped. mcp-sim advances it to the next instant of its
// own before each input, so the program is never ahead of what it is sent (a conservative
// step, as in parallel discrete-event simulation). The greeting says so (`"lookahead": true`).
//
// synctest does not order goroutines woken at one instant. Each input is therefore delivered
// at a microsecond of its own within its millisecond (the k-th at k modulo 1000), after the
// server has settled on the one before: no two inputs share an instant, and neither do the
// timers their handling starts (two calls' steps of 1 s, say, begun at whole milliseconds).
// Virtual time in the traces is whole milliseconds, so the microseconds never show.
//
// What a bubble cannot hold, and the peer names as an escape (the run is then not-replayable):
// a goroutine blocked on real I/O, on a channel made outside the bubble or on a contended
// mutex, none of which synctest counts as durably blocked. The peer cannot tell these apart
// from a long computation, so a command not finished within MCP_SIM_THREAD_BOUND_S seconds of
// wall time (10) ends the run with that escape. Go's own randomness (crypto/rand, math/rand,
// map order) is not seeded (the runtime offers no seam for it): running each seed twice
// (`--verify`) shows whether it reaches the wire.
package peer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Server runs an MCP server on in and out until ctx is done or in ends.
type Server func(ctx context.Context, in io.Reader, out io.Writer) error

// NopCloser gives a writer the Close an SDK's transport may ask for.
func NopCloser(w io.Writer) io.WriteCloser { return nopCloser{w} }

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// command is one line of the control protocol.
type command struct {
	Op        string `json:"op"`
	T         int64  `json:"t"`
	Seed      uint64 `json:"seed"`
	Data      string `json:"data"`
	Transport string `json:"transport"`
}

// output is one thing the server did, stamped with its virtual time.
type output struct {
	T    int64   `json:"t"`
	Data *string `json:"data,omitempty"`
	Read *int    `json:"read,omitempty"`
}

type escape struct {
	What  string `json:"what"`
	Where string `json:"where"`
}

// control is the pipe to mcp-sim.
type control struct {
	mu  sync.Mutex
	in  *bufio.Reader
	out io.Writer
	// busy is the watchdog's tick at which the peer took its command; -1 while it waits.
	// (Wall time cannot be read inside the bubble: the watchdog, outside it, counts.)
	busy  int64
	ticks int64
}

func (c *control) read() command {
	line, err := c.in.ReadBytes('\n')
	if err != nil {
		os.Exit(0) // mcp-sim went away
	}
	var cmd command
	if err := json.Unmarshal(line, &cmd); err != nil {
		c.write(map[string]any{"error": fmt.Sprintf("not a command: %v", err)})
		os.Exit(2)
	}
	c.mu.Lock()
	c.busy = c.ticks
	c.mu.Unlock()
	return cmd
}

func (c *control) write(v any) {
	line, _ := json.Marshal(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = -1
	if _, err := c.out.Write(append(line, '\n')); err != nil {
		os.Exit(0)
	}
}

// run is the state of one run inside its bubble.
type run struct {
	ctl   *control
	epoch time.Time
	mu    sync.Mutex
	out   []output
	wrote chan struct{}
	// inputs counts the inputs delivered, each at a microsecond of its own (space).
	inputs int64
}

// now is the bubble's virtual time in whole milliseconds since the run's epoch.
func (r *run) now() int64 { return int64(time.Since(r.epoch) / time.Millisecond) }

func (r *run) record(o output) {
	r.mu.Lock()
	r.out = append(r.out, o)
	r.mu.Unlock()
}

// stdout is the server's stdout.
type stdout struct{ r *run }

func (w stdout) Write(p []byte) (int, error) {
	text := string(p)
	w.r.record(output{T: w.r.now(), Data: &text})
	select {
	case w.r.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

// stdin is the server's stdin: what it reads is recorded where it reads it.
type stdin struct {
	r    *run
	pipe *io.PipeReader
}

func (s stdin) Read(p []byte) (int, error) {
	n, err := s.pipe.Read(p)
	if n > 0 {
		s.r.record(output{T: s.r.now(), Read: &n})
	}
	return n, err
}

func (r *run) report(extra map[string]any) {
	r.mu.Lock()
	out := r.out
	r.out = nil
	r.mu.Unlock()
	if out == nil {
		out = []output{}
	}
	msg := map[string]any{"t": r.now(), "out": out, "next": nil, "escapes": []escape{}}
	for k, v := range extra {
		msg[k] = v
	}
	r.ctl.write(msg)
}

// until moves the clock to t ms, or to the server's first write before it.
func (r *run) until(t int64) {
	select {
	case <-r.wrote: // reported already
	default:
	}
	d := time.Until(r.epoch.Add(time.Duration(t) * time.Millisecond))
	if d <= 0 {
		synctest.Wait()
		return
	}
	timer := time.NewTimer(d)
	select {
	case <-r.wrote:
		timer.Stop()
	case <-timer.C:
	}
	synctest.Wait()
}

// space moves the clock to input k's own microsecond within millisecond t (k modulo 1000),
// or one microsecond on when the clock is past it: no two inputs share an instant, and
// neither do the timers their handling starts, which synctest would wake in no set order.
func (r *run) space(t int64) {
	r.inputs++
	at := r.epoch.Add(time.Duration(t)*time.Millisecond + time.Duration(r.inputs%1000)*time.Microsecond)
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	} else {
		time.Sleep(time.Microsecond)
	}
	synctest.Wait()
}

// Serve runs the server server makes under mcp-sim's control protocol, or skips the test when
// mcp-sim is not the one running it.
func Serve(t *testing.T, server Server) {
	t.Helper()
	if os.Getenv("MCP_SIM_VIRTUAL_PEER") == "" {
		t.Skip("run by mcp-sim sweep --virtual (MCP_SIM_VIRTUAL_PEER is not set)")
	}
	ctl := &control{in: bufio.NewReader(os.Stdin), out: os.Stdout, busy: -1}
	// The test's own output must not reach the control pipe.
	os.Stdout = os.Stderr
	bound := 10.0
	if v, err := strconv.ParseFloat(os.Getenv("MCP_SIM_THREAD_BOUND_S"), 64); err == nil && v > 0 {
		bound = v
	}
	ctl.write(map[string]any{"zygote": os.Getpid(), "go": runtime.Version(), "lookahead": true})
	spawn := ctl.read()
	if spawn.Op != "spawn" {
		ctl.write(map[string]any{"error": fmt.Sprintf("the peer takes spawn first, not %q", spawn.Op)})
		os.Exit(2)
	}
	go watchdog(ctl, bound)
	synctest.Test(t, func(t *testing.T) {
		r := &run{ctl: ctl, wrote: make(chan struct{}, 1)}
		r.epoch = time.Now().Add(-time.Duration(spawn.T) * time.Millisecond)
		if spawn.Transport != "" && spawn.Transport != "stdio" {
			r.report(map[string]any{"escapes": []escape{{What: "the Go shim serves stdio only (" + spawn.Transport + " asked)", Where: "shim"}}, "fatal": true})
			os.Exit(3)
		}
		pipeR, pipeW := io.Pipe()
		feed := make(chan []byte, 1024)
		go func() {
			for b := range feed {
				if b == nil {
					pipeW.Close()
					return
				}
				if _, err := pipeW.Write(b); err != nil {
					return
				}
			}
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan int, 1)
		go func() {
			code := 0
			if err := server(ctx, stdin{r: r, pipe: pipeR}, stdout{r: r}); err != nil && err != io.EOF && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "the server ended: %v\n", err)
				code = 1
			}
			done <- code
		}()
		synctest.Wait()
		for {
			select {
			case code := <-done:
				r.report(map[string]any{"exit": code})
				os.Exit(0)
			default:
			}
			r.report(nil)
			cmd := ctl.read()
			switch cmd.Op {
			case "end":
				os.Exit(0)
			case "advance":
				r.until(cmd.T)
			case "deliver", "close":
				r.until(cmd.T)
				r.space(cmd.T)
				if cmd.Op == "deliver" {
					feed <- []byte(cmd.Data)
				} else {
					feed <- nil
				}
				synctest.Wait()
			default:
				r.report(map[string]any{"escapes": []escape{{What: "the Go shim has no " + strconv.Quote(cmd.Op), Where: "shim"}}, "fatal": true})
				os.Exit(3)
			}
		}
	})
}

// watchdog ends a run whose command never comes back: a goroutine of the bubble blocked where
// synctest cannot see it (real I/O, a channel made outside the bubble, a contended mutex).
func watchdog(ctl *control, bound float64) {
	const quarters = 4
	for {
		time.Sleep(time.Duration(bound * float64(time.Second) / quarters))
		ctl.mu.Lock()
		ctl.ticks++
		stuck := ctl.busy >= 0 && ctl.ticks-ctl.busy > quarters
		ctl.mu.Unlock()
		if stuck {
			ctl.write(map[string]any{
				"t": 0, "out": []output{}, "next": nil, "fatal": true,
				"escapes": []escape{{
					What: fmt.Sprintf("the server did not settle within %g s of wall time: a goroutine is "+
						"blocked where synctest cannot see it (real I/O, a channel made outside the bubble, "+
						"a contended mutex), or computing", bound),
					Where: "the bubble",
				}},
			})
			os.Exit(3)
		}
	}
}
