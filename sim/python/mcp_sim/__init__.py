"""mcp-sim from Python: probe a server, judge a trace, read the verdict as typed values.

The functions run the `mcp-sim` binary that this package installs (the same command as
`cargo install`) with `--format json` and turn its output into a :class:`Report`. A report is
never guessed: an exit code the command does not document, or output that is not its JSON
verdict, raises :class:`McpSimError` with what the command printed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = [
    "McpSimError",
    "Report",
    "Violation",
    "Finding",
    "SweepReport",
    "FailingSeed",
    "binary",
    "check_trace",
    "probe",
    "sweep",
]

_EXE = "mcp-sim.exe" if sys.platform == "win32" else "mcp-sim"


class McpSimError(Exception):
    """The command could not judge anything: bad usage, an unreadable file, no verdict."""


@dataclass(frozen=True)
class Violation:
    """One broken rule: its name, level (`MUST`, `SHOULD`, `policy`), where the spec says it,
    and why, with the trace events involved (the decisive one last)."""

    rule: str
    level: str
    spec: str
    message: str
    events: tuple[int, ...] = ()

    def __str__(self) -> str:
        spec = f"  ({self.spec})" if self.spec else ""
        return f"[{self.level}] {self.rule}: {self.message}{spec}"


@dataclass(frozen=True)
class Finding:
    """What the probe concluded beyond the rules: a server fault, or why a run was
    inconclusive (`kind` is `fault` or `inconclusive`)."""

    finding: str
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.finding} ({self.kind}): {self.message}"


@dataclass(frozen=True)
class Report:
    """A verdict of `mcp-sim`: the word, the exit code the command gave, the era judged, the
    violations and findings, and the command line that reruns it."""

    verdict: str
    exit_code: int
    era: str
    violations: tuple[Violation, ...]
    findings: tuple[Finding, ...]
    replay: str
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Whether the command passed (exit code 0)."""
        return self.exit_code == 0

    def summary(self) -> str:
        """The whole report as text: the verdict, each violation and finding, the replay."""
        lines = [f"mcp-sim: {self.verdict} (exit {self.exit_code}, era {self.era})"]
        lines += [f"  {v}" for v in self.violations]
        lines += [f"  {f}" for f in self.findings]
        lines.append(f"replay: {self.replay}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True)
class FailingSeed:
    """A seed of a virtual sweep that broke a MUST rule (or could not be trusted, with `why`),
    and the line that replays it with the same trace digest."""

    seed: int
    rules: tuple[str, ...]
    replay: str
    digest: str = ""
    why: str = ""

    def __str__(self) -> str:
        what = ", ".join(self.rules) if self.rules else f"not-replayable: {self.why}"
        return f"seed {self.seed}: {what}\n  replay: {self.replay}"


@dataclass(frozen=True)
class SweepReport:
    """A virtual sweep: how many runs, the digest of every trace, the rules broken (runs per
    rule), the failing and the not-replayable seeds with their replay lines."""

    exit_code: int
    runs: int
    traces: str
    violations: Mapping[str, int]
    failing: tuple[FailingSeed, ...]
    not_replayable: tuple[FailingSeed, ...]
    inconclusive: int
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Every run judged, something exercised, no MUST rule broken (exit code 0)."""
        return self.exit_code == 0

    def summary(self) -> str:
        """The sweep as text: the counts, then each failing or not-replayable seed."""
        lines = [f"mcp-sim sweep --virtual: {self.runs} runs, traces {self.traces} (exit {self.exit_code})"]
        lines += [f"  {rule}: {n} runs" for rule, n in sorted(self.violations.items())]
        if self.inconclusive:
            lines.append(f"  {self.inconclusive} runs exercised nothing")
        lines += [f"FAIL {f}" for f in self.failing]
        lines += [f"NOT-REPLAYABLE {f}" for f in self.not_replayable]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def binary() -> str:
    """The path of the `mcp-sim` binary: `MCP_SIM_BIN` when set, else the one this package
    installed beside the interpreter, else the first on `PATH`."""
    candidates = []
    if os.environ.get("MCP_SIM_BIN"):
        candidates.append(Path(os.environ["MCP_SIM_BIN"]))
    for scheme in (sysconfig.get_default_scheme(), _user_scheme()):
        try:
            candidates.append(Path(sysconfig.get_path("scripts", scheme)) / _EXE)
        except KeyError:
            pass
    candidates.append(Path(sys.executable).parent / _EXE)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which(_EXE)
    if found:
        return found
    raise McpSimError(
        "the mcp-sim binary is not installed beside this interpreter nor on PATH "
        "(install the mcp-sim wheel into this environment, or set MCP_SIM_BIN)"
    )


def _user_scheme() -> str:
    return "nt_user" if os.name == "nt" else "posix_user"


#: The exit codes each command documents; anything else is no verdict.
_PROBE_EXITS = {0, 1, 3}
_CHECK_EXITS = {0, 1}


def probe(
    command: str | Sequence[str] | None = None,
    *,
    url: str | None = None,
    seed: int = 0,
    era: str = "auto",
    calls: int | None = None,
    args: Sequence[str] = (),
    baseline: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
) -> Report:
    """Probes a server and returns its report.

    `command` starts a stdio server (a list of arguments, or one string split on spaces);
    `url` probes a Streamable HTTP endpoint instead. `seed` draws the schedule, `era` is
    `auto`, `modern` or a legacy revision, `calls` the number of tool calls, `args` any other
    `mcp-sim probe` flags, `baseline` a file of expected findings.
    """
    if (command is None) == (url is None):
        raise ValueError("give a command or a url, not both")
    argv = [binary(), "probe", "--format", "json", "--seed", str(seed), "--era", era]
    if calls is not None:
        argv += ["--calls", str(calls)]
    if baseline is not None:
        argv += ["--baseline", os.fspath(baseline)]
    argv += list(args)
    if url is not None:
        argv += ["--url", url]
    else:
        parts = command.split() if isinstance(command, str) else list(command)
        if not parts:
            raise ValueError("the command is empty")
        argv += ["--", *parts]
    return _run(argv, _PROBE_EXITS, timeout)


def _seed_range(seeds: range | int) -> tuple[int, int]:
    if isinstance(seeds, int):
        return seeds, seeds + 1
    if not isinstance(seeds, range) or seeds.step != 1 or len(seeds) == 0:
        raise ValueError(f"seeds must be an int or a non-empty range with step 1, not {seeds!r}")
    return seeds.start, seeds.stop


def _flags(args: Sequence[str], name: str = "args") -> list[str]:
    """Extra command-line flags: a list of strings (a mapping or one string is a mistake)."""
    if isinstance(args, Mapping):
        raise TypeError(
            f"{name} takes command-line flags as a list of strings; "
            "give the tool's arguments as tool_args={...}"
        )
    if isinstance(args, (str, bytes)):
        raise TypeError(f"{name} takes a list of flags, not one string: {args!r}")
    flags = list(args)
    for flag in flags:
        if not isinstance(flag, str):
            raise TypeError(f"{name} holds strings only, not {flag!r}")
    return flags


def sweep(
    command: str | Sequence[str],
    *,
    seeds: range | int = range(0, 200),
    transport: str | None = None,
    era: str = "auto",
    tool: str | None = None,
    tool_args: Mapping[str, Any] | None = None,
    calls: int | None = None,
    jobs: int | None = None,
    verify: bool = False,
    args: Sequence[str] = (),
    timeout: float | None = None,
) -> SweepReport:
    """Runs a Python server virtually, seed by seed, under mcp-sim's clock (`mcp-sim sweep
    --virtual`) and returns the sweep.

    `command` is the server as `python server.py ARGS` (a list, or one string split on spaces);
    `seeds` a range (or one seed); `transport` `stdio` or `http`; `era` `auto`, `modern`,
    `legacy` or a revision's date; `tool` and `tool_args` the tool to call and its arguments
    (a mapping); `calls` the calls per run; `jobs` the processes in parallel (default: the
    machine's cores); `verify` runs each seed twice; `args` any other flags of `mcp-sim sweep`.
    """
    a, b = _seed_range(seeds)
    parts = command.split() if isinstance(command, str) else [os.fspath(p) for p in command]
    if not parts:
        raise ValueError("the command is empty")
    argv = [binary(), "sweep", "--virtual", "--format", "json", "--seeds", f"{a}..{b}", "--era", era]
    argv += ["--jobs", str(jobs if jobs is not None else max(1, os.cpu_count() or 1))]
    if transport is not None:
        argv += ["--transport", transport]
    if tool is not None:
        argv += ["--tool", tool]
    if tool_args is not None:
        if not isinstance(tool_args, Mapping):
            raise TypeError(f"tool_args is the tool's arguments as a mapping, not {tool_args!r}")
        argv += ["--args", json.dumps(dict(tool_args))]
    if calls is not None:
        argv += ["--calls", str(calls)]
    if verify:
        argv.append("--verify")
    argv += _flags(args)
    argv += ["--", *parts]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if done.returncode not in _PROBE_EXITS:
        raise McpSimError(
            f"mcp-sim sweep exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}"
        )
    try:
        raw = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise McpSimError(f"the sweep's output is not JSON ({e}): {done.stdout!r}") from e
    failing = tuple(
        FailingSeed(seed=f["seed"], rules=tuple(f["rules"]), replay=f["replay"], digest=f.get("digest", ""))
        for f in raw.get("failing", ())
    )
    not_replayable = tuple(
        FailingSeed(seed=n["seed"], rules=(), replay=n["replay"], why=n["why"])
        for n in raw.get("not_replayable", ())
    )
    return SweepReport(
        exit_code=done.returncode,
        runs=int(raw["runs"]),
        traces=str(raw["traces"]),
        violations={rule: int(c["runs"]) for rule, c in raw.get("violations", {}).items()},
        failing=failing,
        not_replayable=not_replayable,
        inconclusive=int(raw.get("inconclusive", 0)),
        raw=raw,
    )


def check_trace(
    path: str | os.PathLike[str],
    *,
    args: Sequence[str] = (),
    baseline: str | os.PathLike[str] | None = None,
) -> Report:
    """Judges a recorded trace (JSON Lines) and returns its report."""
    argv = [binary(), "check-trace", "--format", "json", *args]
    if baseline is not None:
        argv += ["--baseline", os.fspath(baseline)]
    argv.append(os.fspath(path))
    report = _run(argv, _CHECK_EXITS, None)
    if not report.replay:
        report = _with_replay(report, f"mcp-sim check-trace {os.fspath(path)}")
    return report


def _with_replay(report: Report, replay: str) -> Report:
    return Report(
        verdict=report.verdict,
        exit_code=report.exit_code,
        era=report.era,
        violations=report.violations,
        findings=report.findings,
        replay=replay,
        raw=report.raw,
    )


def _run(argv: list[str], exits: set[int], timeout: float | None) -> Report:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if done.returncode not in exits:
        raise McpSimError(
            f"mcp-sim {argv[1]} exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}"
        )
    line = next((l for l in reversed(done.stdout.splitlines()) if l.startswith("{")), None)
    if line is None:
        raise McpSimError(f"no verdict in the output: {done.stdout!r} {done.stderr!r}")
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as e:
        raise McpSimError(f"the verdict is not JSON ({e}): {line!r}") from e
    return _report(raw, done.returncode)


def _report(raw: Mapping[str, Any], code: int) -> Report:
    violations = tuple(
        Violation(
            rule=v["rule"],
            level=v["level"],
            spec=v.get("spec", ""),
            message=v.get("message", ""),
            events=tuple(v.get("events", ())),
        )
        for v in raw.get("violations", ())
    )
    findings = tuple(
        Finding(finding=f["finding"], kind=f["kind"], message=f.get("message", ""))
        for f in raw.get("findings", ())
    )
    verdict = raw.get("verdict") or ("clean" if raw.get("ok") and not violations else "violations")
    return Report(
        verdict=verdict,
        exit_code=int(raw.get("exit_code", code)),
        era=str(raw.get("era", "")),
        violations=violations,
        findings=findings,
        replay=str(raw.get("replay", "")),
        raw=raw,
    )
