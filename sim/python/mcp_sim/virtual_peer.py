"""Run a real, unmodified Python MCP server under mcp-sim's virtual clock.

mcp-sim starts this file with the server's own interpreter (``python virtual_peer.py
server.py ARGS`` or ``python virtual_peer.py -m package ARGS``) and drives it over the
process's stdin and stdout with one JSON object a line: the *control protocol*, the model's
sans-IO contract spoken across a pipe. The server's own stdin, stdout and clock are virtual;
its stderr is its own.

Process layout
--------------
The first process is a *zygote*: it patches the clock and the entropy sources, imports what
the program imports (read from its source, so the interpreter and the SDK load once), and
then forks one child per run (``{"op": "spawn", "seed": S}``). A child runs the program as
``python server.py`` would, under a fresh copy of that state, and talks on the zygote's pipe
while the zygote waits for it; when it ends, the zygote reports ``{"reaped": STATUS}``. A file
that defines a server without starting it is started as ``mcp run`` does (its ``mcp``,
``server`` or ``app``, or ``server.py:name``). The zygote runs with address-space
randomization off, so objects hashed by identity are ordered alike in every process.

Control protocol (times are whole virtual milliseconds since the run began)
-------------------------------------------------------------------------
mcp-sim sends one command and reads one report, which the peer writes once it is
*quiescent*: every ready callback has run, no worker thread is running, and nothing is left
but timers and input.

- ``{"op": "spawn", "seed": S, "t": T, "transport": "stdio"|"http"}`` (to the zygote)
- ``{"op": "deliver", "t": T, "data": TEXT}``: bytes on the server's stdin at T
- ``{"op": "close", "t": T}``: the server's stdin ends at T
- ``{"op": "advance", "t": T}``: the clock moves to T; timers due by then fire
- ``{"op": "request", "t": T, "stream": N, "method": M, "path": P, "headers": {..},
  "body": TEXT}``: an HTTP request handed to the server's ASGI app on stream N
- ``{"op": "disconnect", "t": T, "stream": N}``: the client went away from stream N
- ``{"op": "end"}``: the run is over; the child exits without a report

An input (``deliver``, ``close``, ``request``, ``disconnect``) may carry a seeded *service
time*, ``"cost_us": N``: once the input reached the program, its loop is busy for N
microseconds (the clock moves, nothing else runs), as handling the message would keep a real
loop; and ``"ties": "timers"`` or ``"input"``: whether the timers due at the input's instant
fire before it (by default the input comes first, as asyncio handles a select's I/O before
the timers due in the same turn).
With ``"hold": true`` the loop does not run after the input: the report names the end of its
service time as ``next``, the inputs that arrive before then are taken the same way, and
``advance`` releases the loop, which finds them all ready at once.

A *client* program (``"role": "client"`` in ``spawn``) has its server process given by
mcp-sim: whatever command it starts (``asyncio.create_subprocess_exec``, and so
``anyio.open_process`` and the SDKs' stdio clients) is a virtual child whose stdin is what
the program writes and whose stdout is what mcp-sim delivers. Then ``{"op": "deliver",
"child": true, ...}`` is bytes on that child's stdout, ``{"op": "exit", "t": T, "code": C}``
its end (its pipes close, its exit is seen), and the report's ``out`` also holds ``{"t",
"spawned": ARGV}`` (the child started), ``{"t", "child": true, "data"}`` (the program wrote
on its stdin), ``{"t", "closed": true}`` (the program closed its stdin) and ``{"t",
"killed": SIGNAL}``. The client's own stdout is its log, with its stderr. Its TCP
connections (``loop.create_connection``, and so anyio's and httpx's) are mcp-sim's too,
whatever host and port (a host name is not resolved): ``{"t", "connect": N, "host",
"port"}`` opens one, ``{"t", "conn": N, "data"}`` is what the program wrote on it and
``{"t", "conn": N, "closed": true}`` its close; ``deliver`` and ``close`` with ``"conn":
N`` are the server's bytes on it and its end.

A *bridge* (``"role": "bridge"``: an intermediary) is both at once: its own stdin and stdout
(or its ASGI app) are its front, served as a server's are, and the child it starts and the
connections it opens are its upstream, as a client's are.

A report: ``{"t": T, "out": [...], "next": MS|null, "escapes": [...], "exit": CODE?}``.
``out`` holds what the server wrote, in order, each stamped with its virtual time:
``{"t", "data"}`` on stdio, and ``{"t", "read": N}`` where it read the next N bytes of its
stdin (the trace records a message received when the program read it); ``{"t", "stream", "status", "headers"}``, ``{"t", "stream",
"body"}`` and ``{"t", "stream", "end": true}`` on HTTP. ``next`` is the server's next timer
deadline (the loop's earliest timer, rounded up to the millisecond). ``escapes`` names what
the shim could not hold deterministic, each with where it happened.

Determinism
-----------
- The asyncio loop is a ``SelectorEventLoop`` whose ``time()`` is the virtual clock and
  whose selector, when the loop would sleep, reports and waits for the next command instead.
  asyncio's ready queue is FIFO, so every step is a function of the inputs.
- Worker threads (anyio's ``to_thread.run_sync``, which the SDK uses for sync tools and for
  the stdio transport's reads and writes, and ``loop.run_in_executor``) run one at a time, in
  the order the loop submitted them, only while the loop waits in its selector; the clock
  stays put while one runs, and the loop goes on only once the thread's result is posted. A
  thread blocked on the virtual stdin gives its turn back until input arrives; one in
  ``time.sleep`` gives it back until the clock reaches the sleep's end. ``time.sleep`` on the
  loop's thread (a blocked loop) moves the clock itself.
- ``time.time``/``monotonic``/``perf_counter`` (and their ``_ns`` forms), ``datetime.now``,
  ``utcnow`` and ``today`` read the virtual clock (the wall clock starts at
  2026-01-01T00:00:00Z); ``random``, ``os.urandom``, ``uuid.uuid4`` and ``secrets`` draw from
  the run's seed; mcp-sim starts the interpreter with ``PYTHONHASHSEED=0``.
- ``time.process_time``/``thread_time`` read the virtual clock too; names bound to the real
  clock functions before the shim patched them (``from time import monotonic``) are rebound.
- Escapes are watched with an audit hook (sockets that connect, bind or resolve;
  subprocesses, forks and execs), threads started outside the worker pools, file descriptors
  registered with the loop, a bound on how long a worker thread may run, and a watchdog for a
  program that never comes back to the loop (``MCP_SIM_THREAD_BOUND_S``, 10 s of wall time).
  A run with an escape is not judged: mcp-sim reports it as ``not-replayable``.

A synchronous program (no event loop: it reads its stdin on its main thread and works in
threads of its own) runs in *thread mode* (``_Baton``): its threads run one at a time and give
way only where the shim sees them wait, so their interleaving is a function of the inputs too.

Of event loops only asyncio's is virtualised: a program that runs anyio on trio, or uvloop, is
reported as an escape (its loop never reaches the shim).
"""

from __future__ import annotations

import ast
import collections
import datetime as _datetime
import importlib.util
import io
import json
import math
import os
import random
import sys
import threading
import time
import traceback

# --------------------------------------------------------------------------------------------
# The clock: integer nanoseconds since the run began.

_EPOCH_S = 1_767_225_600  # 2026-01-01T00:00:00Z: the virtual wall clock's start
_REAL = {
    "time": time.time,
    "time_ns": time.time_ns,
    "monotonic": time.monotonic,
    "monotonic_ns": time.monotonic_ns,
    "perf_counter": time.perf_counter,
    "perf_counter_ns": time.perf_counter_ns,
    "urandom": os.urandom,
    "sleep": time.sleep,
}


class _Clock:
    ns = 0


def _now_s() -> float:
    return _Clock.ns / 1e9


def _now_ms() -> int:
    return _Clock.ns // 1_000_000


def _sleep(secs) -> None:
    """`time.sleep` under the virtual clock: a worker thread's job gives its turn back until
    the clock reaches the end of the sleep; the loop's own thread, blocked as it would be,
    moves the clock itself (what it writes afterwards is stamped that much later); a thread of
    the program's own (an escape) sleeps on the wall clock."""
    if not _Escapes.armed:
        return _REAL["sleep"](secs)
    ns = max(0, int(secs * 1e9))
    if _BATON.active:
        _BATON.block("sleep", _Clock.ns + ns)
        return None
    if _JOBS.sleep(_Clock.ns + ns):
        return None
    if threading.current_thread() is threading.main_thread():
        _Clock.ns += ns
        return None
    return _REAL["sleep"](secs)


def _patch_time() -> None:
    time.sleep = _sleep
    time.process_time = time.thread_time = _now_s
    time.process_time_ns = time.thread_time_ns = lambda: _Clock.ns
    time.time = lambda: _EPOCH_S + _Clock.ns / 1e9
    time.time_ns = lambda: _EPOCH_S * 1_000_000_000 + _Clock.ns
    time.monotonic = _now_s
    time.monotonic_ns = lambda: _Clock.ns
    time.perf_counter = _now_s
    time.perf_counter_ns = lambda: _Clock.ns

    real_dt = _datetime.datetime
    real_date = _datetime.date

    class _Same(type):
        """Instances made by C code (the real class) still pass isinstance checks."""

        def __instancecheck__(cls, obj):
            return isinstance(obj, cls.__mro__[1])

        def __subclasscheck__(cls, sub):
            return issubclass(sub, cls.__mro__[1])

    class datetime(real_dt, metaclass=_Same):  # noqa: N801 (the module's own name)
        @classmethod
        def now(cls, tz=None):
            return cls.fromtimestamp(time.time(), tz)

        @classmethod
        def utcnow(cls):
            return cls.fromtimestamp(time.time(), _datetime.timezone.utc).replace(tzinfo=None)

        @classmethod
        def today(cls):
            return cls.fromtimestamp(time.time())

    class date(real_date, metaclass=_Same):  # noqa: N801
        @classmethod
        def today(cls):
            return cls.fromtimestamp(time.time())

    datetime.__module__ = date.__module__ = "datetime"
    _datetime.datetime = datetime
    _datetime.date = date


# --------------------------------------------------------------------------------------------
# Entropy: one seeded stream per run.


class _Entropy:
    rng = random.Random(0)


def _urandom(n: int) -> bytes:
    return _Entropy.rng.getrandbits(8 * n).to_bytes(n, "little") if n > 0 else b""


def _patch_entropy() -> None:
    os.urandom = _urandom
    random._urandom = _urandom  # SystemRandom and secrets read it
    real_seed = random.Random.seed

    def seed(self, a=None, version=2):
        # An unseeded generator (`random.Random()`) seeds from the run's stream, not the OS.
        if a is None:
            a = _Entropy.rng.getrandbits(64)
        return real_seed(self, a, version)

    random.Random.seed = seed
    import uuid

    uuid._generate_time_safe = None  # uuid1 then reads the (virtual) time and `random`


def _seed(seed: int) -> None:
    _Entropy.rng = random.Random(seed ^ 0x6D63_702D_7369_6D01)
    random.seed(seed)


# --------------------------------------------------------------------------------------------
# Escapes: what the shim cannot hold deterministic, with where it happened.


class _Escapes:
    armed = False
    seen: list = []
    reported = 0
    fatal = False


_STDLIB = None


def _where() -> str:
    """The innermost frame outside the shim and the standard library (the program's line, or
    the library's that called into the standard library), else outside the shim."""
    global _STDLIB
    if _STDLIB is None:
        import sysconfig

        _STDLIB = tuple(os.path.abspath(p) for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})
    here = os.path.abspath(__file__)
    frames = [f for f in reversed(traceback.extract_stack()[:-2]) if os.path.abspath(f.filename) != here]
    for frame in frames:
        path = os.path.abspath(frame.filename)
        if not path.startswith(_STDLIB) or "site-packages" in path:
            return f"{frame.filename}:{frame.lineno}"
    return f"{frames[0].filename}:{frames[0].lineno}" if frames else "?"


def _escape(what: str, where: str | None = None, fatal: bool = False) -> None:
    entry = {"what": what, "where": where or _where()}
    if entry not in _Escapes.seen:
        _Escapes.seen.append(entry)
    _Escapes.fatal = _Escapes.fatal or fatal


_AUDITED = {
    "socket.connect": "a real socket connected",
    "socket.bind": "a real socket was bound",
    "socket.getaddrinfo": "a host name was resolved",
    "subprocess.Popen": "a subprocess was started",
    "os.system": "a shell command was run",
    "os.posix_spawn": "a process was spawned",
    "os.fork": "the process forked",
    "os.exec": "the process exec'd",
}


def _audit(event: str, args) -> None:
    if _Escapes.armed and event in _AUDITED:
        _escape(f"{_AUDITED[event]} ({event})")


# --------------------------------------------------------------------------------------------
# Worker threads: one at a time, in submission order, only while the loop waits.


class _Jobs:
    """Tickets of worker-thread jobs. The loop thread submits; the selector grants turns."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.cv._mcp_sim_real = True
        self.next_ticket = 0
        self.queue: collections.deque = collections.deque()
        self.turn: int | None = None
        self.done: set = set()
        self.blocked: set = set()
        self.sleepers: dict = {}  # ticket -> the virtual ns its time.sleep ends
        self.names: dict = {}
        self.posts = 0  # call_soon_threadsafe calls so far
        self.local = threading.local()

    def submit(self, func) -> int:
        with self.cv:
            ticket = self.next_ticket
            self.next_ticket += 1
            self.queue.append(ticket)
            self.names[ticket] = getattr(func, "__qualname__", repr(func))
            return ticket

    def gate(self, func, submitted: bool = True):
        """`func` as a job that runs only in its turn. It queues now, or (`submitted=False`)
        when the loop hands it to its thread: anyio awaits a checkpoint before that, and a
        job queued earlier would hold the turn while the loop still has to hand it over."""
        jobs = self
        slot = {"ticket": None}

        def gated(*args, **kwargs):
            with jobs.cv:
                while slot["ticket"] is None or jobs.turn != slot["ticket"]:
                    jobs.cv.wait()
            ticket = slot["ticket"]
            jobs.local.ticket = ticket
            try:
                return func(*args, **kwargs)
            finally:
                jobs.local.ticket = None
                with jobs.cv:
                    jobs.done.add(ticket)
                    jobs.cv.notify_all()

        def submit():
            if slot["ticket"] is None:
                slot["ticket"] = jobs.submit(func)

        gated._mcp_sim_submit = submit
        if submitted:
            submit()
        return gated

    def posted(self) -> None:
        with self.cv:
            self.posts += 1
            self.cv.notify_all()

    def block_for_input(self, ready) -> None:
        """Called on a job's thread: give the turn back until `ready()` holds, then wait for it
        again (the selector queues the job once input arrives)."""
        ticket = getattr(self.local, "ticket", None)
        with self.cv:
            if ready():
                return
            if ticket is None and (_BATON.active or _thread_mode_possible()):
                if not _BATON.active:
                    _BATON.activate()
                while not ready():
                    self.cv.release()
                    try:
                        _BATON.block("stdin")
                    finally:
                        self.cv.acquire()
                return
            if ticket is None:
                # A thread of the program's own (reported where it started): wait plainly.
                while not ready():
                    self.cv.wait()
                return
            self.blocked.add(ticket)
            if self.turn == ticket:
                self.turn = None
            self.cv.notify_all()
            while not (ready() and self.turn == ticket):
                self.cv.wait()

    def sleep(self, deadline_ns: int) -> bool:
        """Called on a job's thread by `time.sleep`: give the turn back until the virtual clock
        reaches `deadline_ns`. False when the thread runs no gated job."""
        ticket = getattr(self.local, "ticket", None)
        if ticket is None:
            return False
        with self.cv:
            self.sleepers[ticket] = deadline_ns
            if self.turn == ticket:
                self.turn = None
            self.cv.notify_all()
            while ticket in self.sleepers or self.turn != ticket:
                self.cv.wait()
        return True

    def next_wake_ns(self):
        with self.cv:
            return min(self.sleepers.values()) if self.sleepers else None

    def wake_sleepers(self, now_ns: int) -> bool:
        """Sleeps over by `now_ns` end: their jobs queue for a turn, earliest first."""
        with self.cv:
            due = sorted((d, t) for t, d in self.sleepers.items() if d <= now_ns)
            for _, ticket in due:
                del self.sleepers[ticket]
                self.queue.append(ticket)
            if due:
                self.cv.notify_all()
            return bool(due)

    def wake_blocked(self) -> None:
        """Input arrived: blocked jobs queue for a turn again, oldest first."""
        with self.cv:
            for ticket in sorted(self.blocked):
                self.queue.append(ticket)
            self.blocked.clear()
            self.cv.notify_all()

    def run_pending(self, bound_s: float) -> bool:
        """Runs granted jobs until none is left to run. Returns True when a thread posted to
        the loop (its result, or a call into the loop that it waits on): the loop must run."""
        with self.cv:
            while True:
                if self.turn is None:
                    if not self.queue:
                        return False
                    self.turn = self.queue.popleft()
                    self.cv.notify_all()
                ticket = self.turn
                posts = self.posts
                deadline = _REAL["monotonic"]() + bound_s
                while True:
                    if ticket in self.done and self.posts > posts:
                        self.done.discard(ticket)
                        self.turn = None
                        return True
                    if ticket in self.blocked or ticket in self.sleepers:
                        break  # gave its turn back: the next job may run
                    if ticket not in self.done and self.posts > posts:
                        return True  # it waits on the loop: keep its turn
                    left = deadline - _REAL["monotonic"]()
                    if left <= 0:
                        _escape(
                            f"a worker thread ran more than {bound_s:g} s of wall time "
                            f"({self.names.get(ticket, '?')})",
                            where="worker thread",
                            fatal=True,
                        )
                        return True
                    self.cv.wait(left)


_JOBS = _Jobs()


# --------------------------------------------------------------------------------------------
# Thread mode: a synchronous program's threads, one at a time, under the virtual clock.


class _Baton:
    """A program without an event loop (it reads its stdin on its main thread and works in
    threads of its own) runs in *thread mode*: its threads hold a baton in turn and give it
    up only where the shim can see them wait (a stdin read, `Condition.wait` and so `Event`,
    `Queue` and `Semaphore` waits, `time.sleep`, `Thread.join`, a thread's end). The next
    holder is the first runnable thread, in the order they became runnable, which the baton's
    holder decides: so every interleaving is a function of the inputs. When no thread can run,
    the one that gave the baton up reports and takes the next command, as the loop's selector
    does. A thread blocked anywhere else (a contended lock) stops the run: the watchdog names
    it."""

    def __init__(self) -> None:
        self.cv = threading.Condition(threading.Lock())
        self.cv._mcp_sim_real = True
        self.active = False
        self.holder = None
        self.runnable: collections.deque = collections.deque()
        self.waiting: dict = {}  # thread -> (deadline_ns or None, seq, kind)
        self.woken: set = set()  # threads woken by a notify (not by their deadline)
        self.seq = 0
        self.joiners: dict = {}  # thread -> threads waiting for its end
        self.finished: set = set()

    def activate(self) -> None:
        with self.cv:
            self.active = True
            self.holder = threading.current_thread()

    def _wake(self, thread, by_notify: bool) -> None:
        if thread in self.waiting:
            del self.waiting[thread]
            if by_notify:
                self.woken.add(thread)
            self.runnable.append(thread)

    def wake(self, thread) -> None:
        with self.cv:
            self._wake(thread, True)

    def wake_kind(self, kind: str) -> None:
        with self.cv:
            for t in [t for t, (_, seq, k) in sorted(self.waiting.items(), key=lambda i: i[1][1]) if k == kind]:
                self._wake(t, True)

    def wake_due(self, now_ns: int) -> None:
        with self.cv:
            due = sorted((d, seq, t) for t, (d, seq, _) in self.waiting.items() if d is not None and d <= now_ns)
            for _, _, t in due:
                self._wake(t, False)

    def next_deadline_ns(self):
        with self.cv:
            ds = [d for d, _, _ in self.waiting.values() if d is not None]
            return min(ds) if ds else None

    def block(self, kind: str, deadline_ns=None) -> bool:
        """The holder waits (for `kind` or until `deadline_ns`) and gives the baton up; True
        when it was woken by a notify or input rather than by its deadline."""
        me = threading.current_thread()
        with self.cv:
            self.seq += 1
            self.waiting[me] = (deadline_ns, self.seq, kind)
            self.woken.discard(me)
        self._pass(me)
        with self.cv:
            notified = me in self.woken
            self.woken.discard(me)
        return notified

    def _pass(self, me) -> None:
        """Hands the baton to the next runnable thread; when none can run, `me` reports and
        takes commands until one can. Returns once `me` holds the baton again (never, for a
        thread that has ended)."""
        with self.cv:
            while True:
                if self.runnable:
                    self.holder = self.runnable.popleft()
                    self.cv.notify_all()
                    break
                self.holder = None
                self.cv.release()
                try:
                    _Peer.idle(None, _thread_deadline_ms())
                    self.wake_due(_Clock.ns)
                finally:
                    self.cv.acquire()
            if me in self.finished:
                return
            while self.holder is not me:
                self.cv.wait()

    def enter(self) -> None:
        """A new thread waits for its first turn (the starter queued it)."""
        me = threading.current_thread()
        with self.cv:
            while self.holder is not me:
                self.cv.wait()

    def start(self, thread) -> None:
        with self.cv:
            self.runnable.append(thread)

    def exit(self) -> None:
        me = threading.current_thread()
        with self.cv:
            self.finished.add(me)
            for t in self.joiners.pop(me, []):
                self._wake(t, True)
        self._pass(me)

    def join(self, thread, deadline_ns) -> None:
        me = threading.current_thread()
        with self.cv:
            if thread in self.finished or thread not in self._known(thread):
                return
            self.joiners.setdefault(thread, []).append(me)
        self.block("join", deadline_ns)

    def _known(self, thread):
        return self.finished | set(self.waiting) | set(self.runnable) | {self.holder} | set(self.joiners) | {thread}


_BATON = _Baton()


def _thread_deadline_ms():
    d = _BATON.next_deadline_ns()
    return None if d is None else max(_now_ms(), -(-d // 1_000_000))


# --------------------------------------------------------------------------------------------
# The virtual stdin and stdout.


class _VirtualStdin(io.RawIOBase):
    """The server's stdin: bytes mcp-sim delivered, read as a pipe reads (partial reads)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = False

    def readable(self) -> bool:
        return True

    def feed(self, data: bytes) -> None:
        with _JOBS.cv:
            self.data += data
        _JOBS.wake_blocked()
        _BATON.wake_kind("stdin")

    def close_input(self) -> None:
        with _JOBS.cv:
            self.eof = True
        _JOBS.wake_blocked()
        _BATON.wake_kind("stdin")

    def readinto(self, buffer) -> int:
        _JOBS.block_for_input(lambda: bool(self.data) or self.eof)
        with _JOBS.cv:
            n = min(len(buffer), len(self.data))
            buffer[:n] = self.data[:n]
            del self.data[:n]
        if n:
            # When the program read them, in order with what it wrote: what reached its pipe
            # is not yet what it has seen.
            _OUT.add({"read": n})
        return n


class _Outputs:
    """What the server wrote since the last report, stamped with virtual time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list = []

    def add(self, item: dict) -> None:
        item["t"] = _now_ms()
        with self.lock:
            self.items.append(item)

    def take(self) -> list:
        with self.lock:
            items, self.items = self.items, []
            return items


_OUT = _Outputs()


class _VirtualStdout(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        data = bytes(b)
        if data:
            _OUT.add({"data": data.decode("utf-8", "replace")})
        return len(data)


# --------------------------------------------------------------------------------------------
# HTTP: the server's ASGI app, called in the loop (no sockets).


class _Http:
    def __init__(self) -> None:
        self.app = None
        self.disconnected: dict = {}
        self.host = "127.0.0.1:8000"  # where the program meant to listen: its Host check
        # A bridge's requests that came before it served (it may serve only once its upstream
        # is ready), handed to its app when it does, as a live check probes a front once it
        # accepts connections.
        self.pending: list = []

    def serve(self, app) -> None:
        self.app = app
        loop = _Peer.loop
        for cmd in self.pending:
            self.request(loop, cmd)
        self.pending.clear()

    def request(self, loop, cmd: dict) -> None:
        stream = cmd["stream"]
        event = _asyncio().Event()
        self.disconnected[stream] = event
        loop.create_task(self._call(stream, cmd, event))

    def disconnect(self, stream: int) -> None:
        event = self.disconnected.get(stream)
        if event is not None:
            event.set()

    async def _call(self, stream: int, cmd: dict, gone) -> None:
        body = cmd.get("body", "").encode("utf-8")
        given = {k.lower(): v for k, v in cmd["headers"].items()}
        # The host the program bound, unless the request names another (a rebinding check).
        given.setdefault("host", self.host)
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in sorted(given.items())]
        path = cmd.get("path", "/mcp")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": cmd["method"],
            "scheme": "http",
            "path": path,
            "raw_path": path.encode("latin-1"),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000 + stream % 10000),
            "server": (self.host.rsplit(":", 1)[0], int(self.host.rsplit(":", 1)[1])),
            "state": dict(self.state),
        }
        sent_body = False
        ended = False

        async def receive():
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            nonlocal ended
            if ended or gone.is_set():
                raise OSError("the client closed the stream")
            kind = message["type"]
            if kind == "http.response.start":
                hdrs = {}
                for k, v in message.get("headers", []):
                    hdrs[k.decode("latin-1").lower()] = v.decode("latin-1")
                _OUT.add({"stream": stream, "status": message["status"], "headers": hdrs})
            elif kind == "http.response.body":
                chunk = message.get("body", b"")
                if chunk:
                    _OUT.add({"stream": stream, "body": chunk.decode("utf-8", "replace")})
                if not message.get("more_body", False):
                    ended = True
                    _OUT.add({"stream": stream, "end": True})

        try:
            await self.app(scope, receive, send)
        except Exception:
            if not gone.is_set():
                traceback.print_exc()
        finally:
            if not ended and not gone.is_set():
                _OUT.add({"stream": stream, "end": True})
            self.disconnected.pop(stream, None)

    state: dict = {}

    async def lifespan(self, app) -> None:
        """Runs the app's lifespan startup (the SDK's session manager lives there)."""
        asyncio = _asyncio()
        inbox: asyncio.Queue = asyncio.Queue()
        started = asyncio.get_running_loop().create_future()
        await inbox.put({"type": "lifespan.startup"})
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}

        async def send(message):
            if message["type"] == "lifespan.startup.complete" and not started.done():
                started.set_result(None)
            elif message["type"] == "lifespan.startup.failed" and not started.done():
                started.set_exception(RuntimeError(message.get("message", "lifespan failed")))

        async def run():
            try:
                await app(scope, inbox.get, send)
            except Exception as e:  # an app without lifespan support
                if not started.done():
                    started.set_result(None)
                    del e

        asyncio.get_running_loop().create_task(run())
        await started


_HTTP = _Http()


# --------------------------------------------------------------------------------------------
# A client's server: the child process it spawns is mcp-sim's reference server.

# Above Linux's largest pid (2**22): a signal sent to it reaches no real process.
_FAKE_PID = 4_194_304 + 7


class _VirtualChild:
    """The server a client program spawns (`asyncio.create_subprocess_exec`, and with it
    `anyio.open_process` and the SDKs' stdio clients), whatever command it names: an asyncio
    subprocess transport whose stdin is what the program writes (reported as `data`, its
    close as `closed`) and whose stdout is what mcp-sim delivers. Its exit is mcp-sim's to
    say (`exit`, after the reference server ended), or the program's (a signal: `killed`)."""

    current = None

    def __init__(self, loop, protocol, argv, pipes) -> None:
        self.loop = loop
        self.protocol = protocol
        self.argv = argv
        self.returncode = None
        self.waiters: list = []
        self.pipes = {fd: _ChildPipe(self, fd) for fd in pipes}
        self.closed = False
        _VirtualChild.current = self
        _OUT.add({"spawned": [str(a) for a in argv]})

    # The transport asyncio's Process and SubprocessStreamProtocol use.
    def get_pid(self):
        return _FAKE_PID

    def get_returncode(self):
        return self.returncode

    def get_pipe_transport(self, fd):
        return self.pipes.get(fd)

    def get_extra_info(self, name, default=None):
        return default

    def is_closing(self):
        return self.closed

    def send_signal(self, signal):
        if self.returncode is not None:
            raise ProcessLookupError()
        if signal == 0:
            return
        _OUT.add({"killed": int(signal)})
        self.exited(-int(signal))

    def terminate(self):
        import signal

        self.send_signal(signal.SIGTERM)

    def kill(self):
        import signal

        self.send_signal(signal.SIGKILL)

    def close(self):
        if self.closed:
            return
        self.closed = True
        for pipe in self.pipes.values():
            pipe.close()
        if self.returncode is None:
            self.kill()

    async def _wait(self):
        if self.returncode is not None:
            return self.returncode
        waiter = self.loop.create_future()
        self.waiters.append(waiter)
        return await waiter

    # What mcp-sim delivers.
    def feed(self, data: bytes) -> None:
        pipe = self.pipes.get(1)
        if pipe is not None and not pipe.ended:
            self.loop.call_soon(self.protocol.pipe_data_received, 1, data)

    def exited(self, code: int) -> None:
        """The server is gone: its pipes end, then its exit is seen."""
        if self.returncode is not None:
            return
        self.returncode = code
        for fd in sorted(self.pipes):
            self.pipes[fd].end()
        self.loop.call_soon(self._process_exited)

    def _process_exited(self):
        self.protocol.process_exited()
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(self.returncode)
        self.waiters.clear()
        if _VirtualChild.current is self:
            _VirtualChild.current = None


class _Unbuffered:
    """What asyncio's transports share and a virtual one has nothing to do for: no write
    buffer (every write is reported at once), so no flow control to tune."""

    def get_write_buffer_size(self):
        return 0

    def get_write_buffer_limits(self):
        return (0, 0)

    def set_write_buffer_limits(self, high=None, low=None):
        pass

    def writelines(self, chunks):
        for chunk in chunks:
            self.write(chunk)


class _VirtualConn(_Unbuffered):
    """A client's TCP connection (`loop.create_connection`, and so anyio's `connect_tcp` and
    httpx's transports), to whatever host and port: mcp-sim's reference server over HTTP. What
    the program writes is reported as `{"conn": N, "data"}` (its close as `closed`); what
    mcp-sim delivers on connection N is what it reads; mcp-sim's close is its end of file."""

    conns: dict = {}
    count = 0

    def __init__(self, loop, protocol, host, port) -> None:
        _VirtualConn.count += 1
        self.id = _VirtualConn.count
        self.loop = loop
        self.protocol = protocol
        self.closed = False
        self.reading = True
        self.peer = (str(host), int(port or 0))
        _VirtualConn.conns[self.id] = self
        _OUT.add({"connect": self.id, "host": self.peer[0], "port": self.peer[1]})

    def get_extra_info(self, name, default=None):
        if name == "peername":
            return self.peer
        if name == "sockname":
            return ("127.0.0.1", 40000 + self.id % 20000)
        if name == "socket":
            return _ConnSocket(self)
        return default

    def is_closing(self):
        return self.closed

    def pause_reading(self):
        self.reading = False

    def resume_reading(self):
        self.reading = True

    def is_reading(self):
        return self.reading and not self.closed

    def set_protocol(self, protocol):
        self.protocol = protocol

    def get_protocol(self):
        return self.protocol

    def can_write_eof(self):
        return False

    def write(self, data):
        if self.closed:
            return
        data = bytes(data)
        if data:
            _OUT.add({"conn": self.id, "data": data.decode("utf-8", "replace")})

    def close(self):
        if self.closed:
            return
        self.closed = True
        _OUT.add({"conn": self.id, "closed": True})
        self.loop.call_soon(self.protocol.connection_lost, None)

    def abort(self):
        self.close()

    # What mcp-sim delivers.
    def feed(self, data: bytes) -> None:
        if not self.closed:
            self.loop.call_soon(self.protocol.data_received, data)

    def ended(self) -> None:
        """The server closed the connection: end of file, then the connection is lost."""
        if self.closed:
            return
        self.closed = True
        self.loop.call_soon(self.protocol.eof_received)
        self.loop.call_soon(self.protocol.connection_lost, None)


class _ConnSocket:
    """What a virtual connection shows as its socket (anyio reads its addresses, httpx asks
    whether it is readable): no file descriptor, so nothing can poll it; options are ignored."""

    def __init__(self, conn) -> None:
        import socket

        self.conn = conn
        self.family = socket.AF_INET
        self.type = socket.SOCK_STREAM
        self.proto = socket.IPPROTO_TCP

    def fileno(self):
        return -1

    def getpeername(self):
        return self.conn.get_extra_info("peername")

    def getsockname(self):
        return self.conn.get_extra_info("sockname")

    def setsockopt(self, *args):
        pass

    def getsockopt(self, *args):
        return 0


class _ChildPipe(_Unbuffered):
    """One of the child's pipes, as the program's side sees it: stdin (fd 0) written to,
    stdout and stderr (1, 2) read from."""

    def __init__(self, child: _VirtualChild, fd: int) -> None:
        self.child = child
        self.fd = fd
        self.ended = False

    def get_extra_info(self, name, default=None):
        return default

    def is_closing(self):
        return self.ended

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass

    def is_reading(self):
        return not self.ended

    def set_protocol(self, protocol):
        pass

    def can_write_eof(self):
        return self.fd == 0

    def write(self, data):
        if self.fd != 0 or self.ended:
            return
        data = bytes(data)
        if data:
            _OUT.add({"child": True, "data": data.decode("utf-8", "replace")})

    def write_eof(self):
        self.close()

    def close(self):
        if self.ended:
            return
        if self.fd == 0 and self.child.returncode is None:
            _OUT.add({"closed": True})
        self.end()

    def abort(self):
        self.close()

    def end(self):
        """The pipe is over: the protocol hears of it (stdout's end of file, stdin's close)."""
        if self.ended:
            return
        self.ended = True
        self.child.loop.call_soon(self.child.protocol.pipe_connection_lost, self.fd, None)


def _asyncio():
    import asyncio

    return asyncio


# --------------------------------------------------------------------------------------------
# The controller: reports and commands on the control pipe.


class _Control:
    def __init__(self, fd_in: int, fd_out: int) -> None:
        self.fd_in = fd_in
        self.fd_out = fd_out
        self.buf = b""
        self.lock = threading.Lock()
        # The wall-clock instant the peer started working on a command; None while it waits
        # for one (the watchdog's measure).
        self.busy_since: float | None = None

    def read(self) -> dict:
        while b"\n" not in self.buf:
            chunk = os.read(self.fd_in, 65536)
            if not chunk:
                os._exit(0)  # mcp-sim went away
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        self.busy_since = _REAL["monotonic"]()
        return json.loads(line)

    def write(self, obj: dict) -> None:
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8")
        with self.lock:
            self.busy_since = None
            try:
                while data:
                    n = os.write(self.fd_out, data)
                    data = data[n:]
            except OSError:
                os._exit(0)  # mcp-sim went away


def _watchdog(bound_s: float) -> None:
    """Ends a run that never comes back to the shim: a loop the shim does not own (trio,
    uvloop), a busy loop, or a blocking call on the loop's thread. Its report names it."""
    while True:
        time_sleep(min(1.0, bound_s / 4))
        since = _CTL.busy_since
        if since is not None and _REAL["monotonic"]() - since > bound_s:
            _escape(
                f"the program did not come back to the shim's event loop within {bound_s:g} s "
                "of wall time (a loop the shim does not own, such as trio or uvloop, a busy "
                "loop, or a blocking call on the loop's thread)",
                where="the program's main thread",
                fatal=True,
            )
            _Peer.report(None)
            os._exit(3)


time_sleep = _REAL["sleep"]


_CTL: _Control | None = None


class _Peer:
    """The child's side of the protocol."""

    stdin = _VirtualStdin()
    loop = None
    thread_bound_s = float(os.environ.get("MCP_SIM_THREAD_BOUND_S", "10"))
    transport = "stdio"
    # "server": the program serves on its stdin and stdout (or HTTP); "bridge": it does, and
    # also reaches an upstream as a client does; "client": the program
    # is a client whose server process is mcp-sim's (`_VirtualChild`).
    role = "server"

    @classmethod
    def report(cls, deadline_ms=None, **extra) -> None:
        escapes = _Escapes.seen[_Escapes.reported :]
        _Escapes.reported = len(_Escapes.seen)
        msg = {"t": _now_ms(), "out": _OUT.take(), "next": deadline_ms, "escapes": escapes}
        if _Escapes.fatal:
            msg["fatal"] = True
        msg.update(extra)
        _CTL.write(msg)

    # An input held back until the timers due at its instant have fired (`"ties": "timers"`).
    held = None

    @classmethod
    def idle(cls, loop, deadline_ms) -> None:
        """The loop is quiescent: report, then take the next command.

        An input marked ``"hold": true`` (mcp-sim marks every input when it gives service
        times) is taken without the loop running after it: the report that follows names the
        end of its service time as ``next``, and inputs that arrive before then are taken the
        same way, so that the loop, once released (``advance``), finds them all ready at once
        and their handling interleaves, as a real loop's next select returns every input that
        arrived while it was busy."""
        if cls.held is not None:
            cmd, cls.held = cls.held, None
            cls.take(loop, cmd)
            if not cmd.get("hold"):
                return
            deadline_ms = -(-_Clock.ns // 1_000_000)
        while True:
            cls.report(deadline_ms)
            cmd = _CTL.read()
            op = cmd.get("op")
            if op == "end":
                os._exit(0)
            t = int(cmd.get("t", _now_ms()))
            if t * 1_000_000 > _Clock.ns:
                _Clock.ns = t * 1_000_000
            elif op == "advance":
                # Advanced to where it already is: a timer it reported due has not fired.
                _reach_due_timers(loop)
            if cmd.get("ties") == "timers" and op != "advance":
                # The seed put the timers due at this instant first: the loop runs them, and
                # the input is taken at the next quiescent point, before any report.
                cls.held = cmd
                _JOBS.wake_sleepers(_Clock.ns)
                return
            cls.take(loop, cmd)
            if not cmd.get("hold"):
                return
            # Busy until its service time ends: the timers due meanwhile fire late, then.
            deadline_ms = -(-_Clock.ns // 1_000_000)

    @classmethod
    def take(cls, loop, cmd) -> None:
        """An input (or a clock's advance) reaches the program; a seeded service time
        (`cost_us`) then keeps its loop busy, as handling the message would."""
        op = cmd.get("op")
        # Input before the sleeps that end at the same instant, as asyncio handles the I/O a
        # select returns before the timers due in that iteration.
        child = _VirtualChild.current
        if cls.role != "server" and "conn" in cmd:
            conn = _VirtualConn.conns.get(int(cmd["conn"]))
            if conn is not None and op == "deliver":
                conn.feed(cmd["data"].encode("utf-8"))
            elif conn is not None and op == "close":
                conn.ended()
        elif cls.role != "server" and (op == "exit" or (op == "deliver" and cmd.get("child"))):
            if child is None:
                pass  # the server's output after the program let it go: nobody reads it
            elif op == "deliver":
                child.feed(cmd["data"].encode("utf-8"))
            else:
                child.exited(int(cmd.get("code", 0)))
        elif op == "deliver":
            cls.stdin.feed(cmd["data"].encode("utf-8"))
        elif op == "close":
            cls.stdin.close_input()
        elif op == "request":
            if _HTTP.app is None and cls.role == "bridge":
                _HTTP.pending.append(cmd)
            elif _HTTP.app is None:
                _escape("an HTTP request came but the program serves no ASGI app", where="shim", fatal=True)
            else:
                _HTTP.request(loop, cmd)
        elif op == "disconnect":
            _HTTP.pending = [c for c in _HTTP.pending if c["stream"] != cmd["stream"]]
            _HTTP.disconnect(int(cmd["stream"]))
        cost_us = int(cmd.get("cost_us", 0))
        if cost_us > 0:
            _Clock.ns += cost_us * 1000
        _JOBS.wake_sleepers(_Clock.ns)


def _is_pool_thread(t: threading.Thread) -> bool:
    """anyio's worker threads and asyncio's default executor's, whose jobs the shim gates."""
    return t.name == "AnyIO worker thread" or t.name.startswith("asyncio_")


def _thread_mode_possible() -> bool:
    """Thread mode starts at a main-thread stdin read with no event loop, while the program
    has started no thread yet (later ones are held from their start)."""
    if threading.current_thread() is not threading.main_thread() or _Peer.loop is not None:
        return False
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and t.name != "mcp-sim watchdog"]
    return not others


def _patch_threads() -> None:
    real_start = threading.Thread.start
    real_join = threading.Thread.join
    real_wait = threading.Condition.wait

    def start(self):
        if _BATON.active:
            run = self.run

            def held_run():
                _BATON.enter()
                try:
                    run()
                finally:
                    _BATON.exit()

            self.run = held_run
            _BATON.start(self)
            # Thread.start waits for the new thread's bootstrap: a real wait, not a turn.
            self._started._cond._mcp_sim_real = True
            return real_start(self)
        if _Escapes.armed and not _is_pool_thread(self):
            _escape(f"a thread outside the worker pools was started ({self.name})")
        return real_start(self)

    def join(self, timeout=None):
        if _BATON.active and threading.current_thread() is not self:
            deadline = None if timeout is None else _Clock.ns + max(0, int(timeout * 1e9))
            _BATON.join(self, deadline)
            if self in _BATON.finished:
                return real_join(self)
            return None
        return real_join(self, timeout)

    def wait(self, timeout=None):
        if not _BATON.active or getattr(self, "_mcp_sim_real", False):
            return real_wait(self, timeout)
        if not self._is_owned():
            raise RuntimeError("cannot wait on un-acquired lock")
        me = threading.current_thread()

        class Waiter:
            def release(self):
                _BATON.wake(me)

        waiter = Waiter()
        self._waiters.append(waiter)
        saved = self._release_save()
        try:
            deadline = None if timeout is None else _Clock.ns + max(0, int(timeout * 1e9))
            notified = _BATON.block("condition", deadline)
        finally:
            self._acquire_restore(saved)
        if not notified:
            try:
                self._waiters.remove(waiter)
            except ValueError:
                pass
        return notified

    threading.Thread.start = start
    threading.Thread.join = join
    threading.Condition.wait = wait


# --------------------------------------------------------------------------------------------
# The loop.


def _make_loop_class():
    import asyncio
    import selectors

    class _VirtualSelector(selectors.DefaultSelector):
        loop = None

        def register(self, fileobj, events, data=None):
            key = super().register(fileobj, events, data)
            loop = self.loop
            if loop is not None and _Escapes.armed and not _is_self_pipe(loop, fileobj):
                _escape("a real file descriptor was registered with the loop")
            return key

        def select(self, timeout=None):
            try:
                return self._select(timeout)
            except Exception as e:
                # The shim's own failure is never the program's: the run is not judged.
                frame = traceback.extract_tb(e.__traceback__)[-1]
                _escape(f"the shim failed: {e!r}", where=f"{frame.filename}:{frame.lineno}", fatal=True)
                _Peer.report(None)
                os._exit(3)

        def _select(self, timeout):
            loop = self.loop
            posted = _JOBS.run_pending(_Peer.thread_bound_s)
            if _Escapes.fatal:
                _Peer.report(None)
                os._exit(3)
            ready = super().select(0)
            if posted:
                return ready  # a thread's result (or call) is in the ready queue
            if _JOBS.wake_sleepers(_Clock.ns):
                return ready  # a worker thread's sleep is over: it runs at the next select
            if ready or timeout == 0 or loop._ready:
                return ready
            _Peer.idle(loop, _next_deadline_ms(loop))
            return super().select(0)

    def _is_self_pipe(loop, fileobj) -> bool:
        ssock = getattr(loop, "_ssock", None)
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        return ssock is not None and (fileobj is ssock or fd == ssock.fileno())

    class VirtualLoop(asyncio.SelectorEventLoop):
        def __init__(self):
            if _BATON.active:
                # Its threads already take turns by the baton, which the loop's worker threads
                # would wait on without holding it: the two schedules do not mix.
                _escape("an asyncio loop started after the program's threads took turns (thread mode)", fatal=True)
                _Peer.report(None)
                os._exit(3)
            selector = _VirtualSelector()
            selector.loop = self
            super().__init__(selector)
            self._clock_resolution = 1e-6
            _Peer.loop = self

        def time(self):
            return _Clock.ns / 1e9

        def call_soon_threadsafe(self, callback, *args, context=None):
            handle = super().call_soon_threadsafe(callback, *args, context=context)
            _JOBS.posted()
            return handle

        def run_in_executor(self, executor, func, *args):
            return super().run_in_executor(executor, _JOBS.gate(func), *args)

        async def create_connection(self, protocol_factory, host=None, port=None, **kwargs):
            if _Peer.role == "server" or kwargs.get("sock") is not None or kwargs.get("ssl"):
                return await super().create_connection(protocol_factory, host, port, **kwargs)
            protocol = protocol_factory()
            conn = _VirtualConn(self, protocol, host, port)
            protocol.connection_made(conn)
            return conn, protocol

        async def getaddrinfo(self, host, port, *, family=0, type=0, proto=0, flags=0):
            if _Peer.role == "server":
                return await super().getaddrinfo(host, port, family=family, type=type, proto=proto, flags=flags)
            # Every host a client names is the lane's server: nothing is resolved.
            import socket

            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", int(port or 0)))]

        async def subprocess_exec(self, protocol_factory, program, *args, **kwargs):
            if _Peer.role == "server":
                return await super().subprocess_exec(protocol_factory, program, *args, **kwargs)
            return self._virtual_child(protocol_factory, [program, *args], kwargs)

        async def subprocess_shell(self, protocol_factory, cmd, **kwargs):
            if _Peer.role == "server":
                return await super().subprocess_shell(protocol_factory, cmd, **kwargs)
            return self._virtual_child(protocol_factory, ["/bin/sh", "-c", cmd], kwargs)

        def _virtual_child(self, protocol_factory, argv, kwargs):
            """A client's server process: mcp-sim's reference server, one at a time."""
            import subprocess

            if _VirtualChild.current is not None:
                _escape("a second server process was started while the first runs")
                raise OSError("mcp-sim: one server process at a time")
            pipes = [fd for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")) if kwargs.get(name, subprocess.PIPE) == subprocess.PIPE]
            protocol = protocol_factory()
            child = _VirtualChild(self, protocol, argv, pipes)
            protocol.connection_made(child)
            return child, protocol

    return VirtualLoop


def _reach_due_timers(loop) -> None:
    """Moves the clock the few nanoseconds past a timer the shim reported due by now that did
    not fire when the clock reached its millisecond: its float deadline (anyio's `start +
    timeout`) lies a rounding error past that millisecond, and anyio fires a deadline only
    once `deadline <= time()`, re-arming it at the same millisecond forever otherwise. The
    millisecond the program sees does not change."""
    if loop is None:
        return
    for handle in loop._scheduled:
        when = handle.when()
        if handle.cancelled() or not math.isfinite(when):
            continue
        if math.ceil(when * 1000 - 1e-6) * 1_000_000 > _Clock.ns or when <= _Clock.ns / 1e9:
            continue
        ns = math.ceil(when * 1e9)
        while ns / 1e9 < when:
            ns += 1
        _Clock.ns = max(_Clock.ns, ns)


def _next_deadline_ms(loop):
    """The loop's earliest timer, or a worker thread's sleep, whichever ends first."""
    # A timer at infinity (anyio's sleep_forever) never fires: it is no deadline.
    whens = [
        math.ceil(h.when() * 1000 - 1e-6)
        for h in loop._scheduled
        if not h.cancelled() and math.isfinite(h.when())
    ]
    wake = _JOBS.next_wake_ns()
    if wake is not None:
        whens.append(-(-wake // 1_000_000))
    if not whens:
        return None
    return max(_now_ms(), min(whens))


def _install_loop() -> None:
    import asyncio

    loop_class = _make_loop_class()

    class Policy(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self):
            return loop_class()

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_event_loop_policy(Policy())
    asyncio.new_event_loop = lambda: loop_class()
    asyncio.events.new_event_loop = asyncio.new_event_loop


def _patch_anyio() -> None:
    try:
        from anyio._backends import _asyncio as backend
    except Exception:
        return
    real = backend.AsyncIOBackend.run_sync_in_worker_thread.__func__

    async def run_sync_in_worker_thread(cls, func, args, abandon_on_cancel=False, limiter=None):
        gated = _JOBS.gate(func, submitted=False)
        return await real(cls, gated, args, abandon_on_cancel=abandon_on_cancel, limiter=limiter)

    backend.AsyncIOBackend.run_sync_in_worker_thread = classmethod(run_sync_in_worker_thread)

    class _HandOver(backend.Queue):
        """A worker's queue: a gated job takes its place in line as the loop hands it over."""

        def put_nowait(self, item):
            submit = getattr(item[1], "_mcp_sim_submit", None) if item else None
            if submit is not None:
                submit()
            return super().put_nowait(item)

    real_init = backend.WorkerThread.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.queue = _HandOver(2)

    backend.WorkerThread.__init__ = init


def _patch_signals() -> None:
    """A client's signals to its server process (`os.kill`, `os.killpg`: the SDKs kill the
    server's process group at shutdown) reach the virtual child, never a real process."""

    def to_child(real):
        def send(pid, sig):
            if pid != _FAKE_PID:
                return real(pid, sig)
            if _VirtualChild.current is None:
                raise ProcessLookupError(pid)
            return _VirtualChild.current.send_signal(sig)

        return send

    os.kill = to_child(os.kill)
    os.killpg = to_child(os.killpg)


def _patch_uvicorn() -> None:
    try:
        import uvicorn
    except Exception:
        return

    async def serve(self, sockets=None):
        config = self.config
        if not config.loaded:
            config.load()
        app = config.loaded_app
        _HTTP.host = f"{config.host}:{config.port}"
        if config.lifespan != "off":
            await _HTTP.lifespan(app)
        _HTTP.serve(app)
        await _asyncio().Event().wait()  # serves until the run ends

    def run(self, sockets=None):
        return _asyncio().run(self.serve(sockets=sockets))

    uvicorn.Server.serve = serve
    uvicorn.Server.run = run


# --------------------------------------------------------------------------------------------
# The program.


def _program(argv: list) -> tuple:
    """('module', name, args), ('script', path, args), or ('object', 'path:name', args) for a
    server object in a file, as `mcp run server.py:app` names one."""
    if not argv:
        raise SystemExit("virtual_peer: give the server: server.py ARGS or -m module ARGS")
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit("virtual_peer: -m needs a module name")
        return ("module", argv[1], argv[2:])
    path, colon, name = argv[0].rpartition(":")
    if colon and path.endswith(".py") and name.isidentifier():
        return ("object", argv[0], argv[1:])
    return ("script", argv[0], argv[1:])


def _imports_of(source: str) -> list:
    names = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return names
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.If):  # `if __name__ == "__main__":` bodies import too
            for inner in node.body:
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    names += _imports_of(ast.unparse(inner))
    return names


def _prewarm(kind: str, target: str) -> None:
    """Imports what the program imports, once, in the zygote; failures are left to the run."""
    source = None
    if kind == "object":
        kind, target = "script", target.rpartition(":")[0]
    if kind == "script":
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        try:
            with open(target, encoding="utf-8") as f:
                source = f.read()
        except OSError:
            return
    else:
        sys.path.insert(0, os.getcwd())
        try:
            spec = importlib.util.find_spec(target)
            if spec and spec.origin and spec.origin.endswith(".py"):
                with open(spec.origin, encoding="utf-8") as f:
                    source = f.read()
        except Exception:
            return
    for name in _imports_of(source or "") + ["anyio._backends._asyncio", "uvicorn"]:
        try:
            __import__(name)
        except BaseException:  # an ImportError, or a name that is an attribute
            pass


_SERVER_NAMES = ("mcp", "server", "app")


def _rebind_clock_aliases() -> None:
    """Modules that imported a clock function by name before the shim patched it (`from time
    import monotonic`) hold the real one: rebind those names to the virtual clock. threading
    keeps its own (its waits are real ones) and the shim its own."""
    real = {id(f): name for name, f in _REAL.items() if name not in ("urandom", "sleep")}
    skip = {__name__, "threading", "time", "_thread"}
    for modname, module in list(sys.modules.items()):
        if modname in skip or module is None:
            continue
        try:
            names = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in names:
            if id(value) in real and value is _REAL[real[id(value)]]:
                try:
                    setattr(module, attr, getattr(time, real[id(value)]))
                except (AttributeError, TypeError):
                    pass


def _run_program(kind: str, target: str, args: list) -> int:
    """Runs the program as `python` would. A file that defines a server but does not start it
    (no `__main__` block; or `server.py:name`) is started the way `mcp run` does: its `mcp`,
    `server` or `app` (or the named object) is run on the transport asked for."""
    import runpy

    if kind == "object":
        path, _, name = target.rpartition(":")
        sys.argv = [path] + args
        found = runpy.run_path(path, run_name="__mcp_sim_server__")
        if name not in found:
            raise SystemExit(f"virtual_peer: {path} defines no {name!r}")
        return _serve_object(found[name])
    sys.argv = [target] + args
    if kind == "script":
        found = runpy.run_path(target, run_name="__main__")
    else:
        found = runpy.run_module(target, run_name="__main__", alter_sys=True)
    if _Peer.loop is None and _Peer.role == "server":
        for name in _SERVER_NAMES:
            if hasattr(found.get(name), "run"):
                return _serve_object(found[name])
    return 0


def _serve_object(server) -> int:
    """Runs a server object (the SDKs' `MCPServer`/`FastMCP`) on the run's transport."""
    if not hasattr(server, "run"):
        raise SystemExit(f"virtual_peer: {server!r} has no run(): it is not a server object")
    server.run("stdio" if _Peer.transport == "stdio" else "streamable-http")
    return 0


def _child(seed: int, t_ms: int, transport: str, role: str, kind: str, target: str, args: list) -> None:
    _Peer.transport = transport
    _Peer.role = role
    _Clock.ns = t_ms * 1_000_000
    _seed(seed)
    stdin = _VirtualStdin()
    _Peer.stdin = stdin
    if role in ("server", "bridge"):
        sys.stdin = io.TextIOWrapper(io.BufferedReader(stdin), encoding="utf-8", errors="replace")
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(_VirtualStdout()), encoding="utf-8", line_buffering=True)
    else:
        # A client's own stdout is its log (its stderr's file); its stdin is empty.
        stdin.close_input()
        sys.stdin = io.TextIOWrapper(io.BufferedReader(stdin), encoding="utf-8", errors="replace")
    watchdog = threading.Thread(target=_watchdog, args=(_Peer.thread_bound_s,), name="mcp-sim watchdog", daemon=True)
    watchdog.start()
    _CTL.busy_since = _REAL["monotonic"]()
    _Escapes.armed = True
    code = 0
    try:
        _run_program(kind, target, args)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
    except Exception:
        pass
    _Escapes.armed = False
    _Peer.report(None, exit=code)
    os._exit(0)


_ADDR_NO_RANDOMIZE = 0x0040000


def _fixed_addresses() -> bool:
    """Runs the zygote with address-space randomization off (Linux `personality`), re-executing
    itself once: `id()` values, and so the order of sets and dicts of objects hashed by
    identity, are then the same in every zygote, not only in the children of one."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        current = libc.personality(0xFFFFFFFF)
    except (OSError, AttributeError):
        return False
    if current == -1:
        return False
    if current & _ADDR_NO_RANDOMIZE:
        return True
    if os.environ.get("MCP_SIM_ZYGOTE_REEXEC") or libc.personality(current | _ADDR_NO_RANDOMIZE) == -1:
        return False
    os.environ["MCP_SIM_ZYGOTE_REEXEC"] = "1"
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]])
    return False  # not reached


def _zygote(argv: list) -> None:
    global _CTL
    fixed = _fixed_addresses()
    os.environ.pop("MCP_SIM_ZYGOTE_REEXEC", None)
    # The control pipe is the zygote's stdin and stdout; the program gets neither.
    fd_in, fd_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    _CTL = _Control(fd_in, fd_out)
    kind, target, args = _program(argv)
    _patch_time()
    _patch_entropy()
    _patch_threads()
    _patch_signals()
    sys.addaudithook(_audit)
    _prewarm(kind, target)
    _rebind_clock_aliases()
    _install_loop()
    _patch_anyio()
    _patch_uvicorn()
    _CTL.write({"zygote": os.getpid(), "python": sys.version.split()[0], "fixed_addresses": fixed})
    while True:
        cmd = _CTL.read()
        if cmd.get("op") != "spawn":
            _CTL.write({"error": f"the zygote takes spawn, not {cmd.get('op')!r}"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            role = cmd.get("role", "server")
            _child(int(cmd.get("seed", 0)), int(cmd.get("t", 0)), cmd.get("transport", "stdio"), role, kind, target, args)
        _, status = os.waitpid(pid, 0)
        _CTL.write({"reaped": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    _zygote(sys.argv[1:])
