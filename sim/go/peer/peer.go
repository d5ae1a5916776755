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
// goes over the process's stdin and stdout; the server's stdio is a pair of in-memory pipes,
// and over HTTP each request is a call of the program's handler with no socket (Run).
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
// map order) cannot be seeded from outside; where an SDK offers a seam, the glue gives it the
// run's seeded Rand or Text (go-sdk's ServerOptions.GetSessionID, google/uuid's SetRand).
// Running each seed twice (`--verify`) shows whether anything else random reaches the wire.
package peer

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Server runs an MCP server on in and out until ctx is done or in ends.
type Server func(ctx context.Context, in io.Reader, out io.Writer) error

// Servers are a program's servers, one per transport it serves (either may be nil).
type Servers struct {
	// Stdio serves stdio.
	Stdio Server
	// HTTP makes the program's Streamable HTTP handler (inside the run's bubble: its
	// goroutines and timers must be the bubble's). Each request of the control protocol is
	// one call of its ServeHTTP, with no socket: a client's close cancels the request's
	// context.
	HTTP func() http.Handler
}

// The run's entropy, for the seams an SDK offers (Rand, Text).
var entropy struct {
	sync.Mutex
	source *mrand.ChaCha8
}

func seed(s uint64) {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], s)
	copy(key[8:], "mcp-sim virtual peer entropy")
	entropy.Lock()
	entropy.source = mrand.NewChaCha8(key)
	entropy.Unlock()
}

type entropyReader struct{}

func (entropyReader) Read(p []byte) (int, error) {
	entropy.Lock()
	defer entropy.Unlock()
	if entropy.source == nil {
		seed(0)
	}
	return entropy.source.Read(p)
}

// Rand is the run's random bytes, drawn from its seed: give it where an SDK takes a source
// of randomness (google/uuid's SetRand, which mcp-go's session ids use).
func Rand() io.Reader { return entropyReader{} }

// Text is a random text as crypto/rand.Text makes one (26 base32 letters), drawn from the
// run's seed: give it where an SDK makes its ids with rand.Text (go-sdk's
// ServerOptions.GetSessionID).
func Text() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b := make([]byte, 26)
	_, _ = Rand().Read(b)
	for i := range b {
		b[i] = alphabet[b[i]%32]
	}
	return string(b)
}

// NopCloser gives a writer the Close an SDK's transport may ask for.
func NopCloser(w io.Writer) io.WriteCloser { return nopCloser{w} }

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// command is one line of the control protocol.
type command struct {
	Op        string            `json:"op"`
	T         int64             `json:"t"`
	Seed      uint64            `json:"seed"`
	Data      string            `json:"data"`
	Transport string            `json:"transport"`
	Stream    uint64            `json:"stream"`
	Method    string            `json:"method"`
	Path      string            `json:"path"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
}

// output is one thing the server did, stamped with its virtual time.
type output struct {
	T       int64             `json:"t"`
	Data    *string           `json:"data,omitempty"`
	Read    *int              `json:"read,omitempty"`
	Stream  *uint64           `json:"stream,omitempty"`
	Status  int               `json:"status,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    *string           `json:"body,omitempty"`
	End     bool              `json:"end,omitempty"`
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
	w.r.emit(output{T: w.r.now(), Data: &text})
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

// Serve runs a stdio server under mcp-sim's control protocol, or skips the test when mcp-sim
// is not the one running it.
func Serve(t *testing.T, server Server) {
	t.Helper()
	Run(t, Servers{Stdio: server})
}

// Run runs the program's server for the transport mcp-sim asks for under its control
// protocol, or skips the test when mcp-sim is not the one running it.
func Run(t *testing.T, servers Servers) {
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
	seed(spawn.Seed)
	synctest.Test(t, func(t *testing.T) {
		r := &run{ctl: ctl, wrote: make(chan struct{}, 1)}
		r.epoch = time.Now().Add(-time.Duration(spawn.T) * time.Millisecond)
		if spawn.Transport == "http" {
			if servers.HTTP == nil {
				r.report(map[string]any{"escapes": []escape{{What: "HTTP was asked for, and the test gives peer.Run no HTTP handler", Where: "the test's peer.Servers"}}, "fatal": true})
				os.Exit(3)
			}
			r.serveHTTP(servers.HTTP())
			return
		}
		if servers.Stdio == nil {
			r.report(map[string]any{"escapes": []escape{{What: "stdio was asked for, and the test gives peer.Run no stdio server", Where: "the test's peer.Servers"}}, "fatal": true})
			os.Exit(3)
		}
		server := servers.Stdio
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

// serveHTTP takes HTTP requests and disconnects until the run ends.
func (r *run) serveHTTP(handler http.Handler) {
	gone := map[uint64]*response{}
	synctest.Wait()
	for {
		r.report(nil)
		cmd := r.ctl.read()
		switch cmd.Op {
		case "end":
			os.Exit(0)
		case "advance":
			r.until(cmd.T)
		case "request":
			r.until(cmd.T)
			r.space(cmd.T)
			w := r.request(handler, cmd)
			gone[cmd.Stream] = w
			synctest.Wait()
		case "disconnect":
			r.until(cmd.T)
			r.space(cmd.T)
			if w := gone[cmd.Stream]; w != nil {
				w.disconnect()
				delete(gone, cmd.Stream)
			}
			synctest.Wait()
		default:
			r.report(map[string]any{"escapes": []escape{{What: "the Go shim has no " + strconv.Quote(cmd.Op) + " over HTTP", Where: "shim"}}, "fatal": true})
			os.Exit(3)
		}
	}
}

// request starts one call of the handler for cmd, in a goroutine of the bubble.
func (r *run) request(handler http.Handler, cmd command) *response {
	path := cmd.Path
	if path == "" {
		path = "/mcp"
	}
	host := cmd.Headers["host"]
	if host == "" {
		host = "127.0.0.1:8080"
	}
	req := httptest.NewRequest(cmd.Method, "http://"+host+path, strings.NewReader(cmd.Body))
	for name, value := range cmd.Headers {
		req.Header.Set(name, value)
	}
	req.Host = host
	ctx, cancel := context.WithCancel(context.Background())
	w := &response{r: r, stream: cmd.Stream, header: http.Header{}, cancel: cancel}
	go func() {
		handler.ServeHTTP(w, req.WithContext(ctx))
		w.end()
	}()
	return w
}

// response is a request's http.ResponseWriter: what the handler writes is reported as it
// writes it (so Flush has nothing left to do).
type response struct {
	r      *run
	stream uint64
	header http.Header
	cancel context.CancelFunc
	mu     sync.Mutex
	head   bool
	done   bool
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHead(status)
}

func (w *response) writeHead(status int) {
	if w.head || w.done {
		return
	}
	w.head = true
	headers := map[string]string{}
	for name, values := range w.header {
		headers[strings.ToLower(name)] = strings.Join(values, ", ")
	}
	stream := w.stream
	w.r.emit(output{T: w.r.now(), Stream: &stream, Status: status, Headers: headers})
}

func (w *response) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return 0, http.ErrHandlerTimeout
	}
	w.writeHead(http.StatusOK)
	if len(b) > 0 {
		body, stream := string(b), w.stream
		w.r.emit(output{T: w.r.now(), Stream: &stream, Body: &body})
	}
	return len(b), nil
}

// Flush is there for handlers that stream (server-sent events): each write is reported
// already.
func (w *response) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHead(http.StatusOK)
}

func (w *response) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	w.writeHead(http.StatusOK)
	w.done = true
	stream := w.stream
	w.r.emit(output{T: w.r.now(), Stream: &stream, End: true})
}

// disconnect is the client's close: the request's context ends, and nothing more of the
// response is reported.
func (w *response) disconnect() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	w.cancel()
}

// emit records a write and wakes a run that runs ahead.
func (r *run) emit(o output) {
	r.record(o)
	select {
	case r.wrote <- struct{}{}:
	default:
	}
}
