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
    "binary",
    "check_trace",
    "probe",
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
