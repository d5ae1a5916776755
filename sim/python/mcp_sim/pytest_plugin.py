"""The pytest plugin of mcp-sim: the `mcp_sim` fixture and `--mcp-sim-seeds`.

A test asks the fixture to probe a server, or to sweep it under the virtual clock; each seed
that does not pass fails the test with the whole report of every failing seed and the line
that reruns it:

    def test_cancellation(mcp_sim):
        mcp_sim.probe(["python", "server.py"])

    def test_cancellation_by_seed(mcp_sim):
        mcp_sim.sweep(["python", "server.py"], seeds=range(200), tool_args={"steps": 5})

`pytest --mcp-sim-seeds 0..20` runs seeds 0 to 19 in every such test (also `7` or `1,5,9`;
a sweep takes a range only); by default each probe runs the seed it names (0 unless given)
and each sweep its `seeds`.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import pytest

from . import Report, SweepReport, check_trace, probe, sweep


def parse_seeds(text: str) -> list[int]:
    """`7`, `1,5,9` or `A..B` (B excluded) as a list of seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if ".." in part:
            a, b = part.split("..", 1)
            lo, hi = int(a), int(b)
            if hi <= lo:
                raise ValueError(f"empty seed range {part!r}")
            seeds.extend(range(lo, hi))
        elif part:
            seeds.append(int(part))
    if not seeds:
        raise ValueError(f"no seeds in {text!r}")
    return seeds


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcp-sim")
    group.addoption(
        "--mcp-sim-seeds",
        default=None,
        metavar="SEEDS",
        help="the seeds every mcp_sim probe runs: N, A..B (B excluded) or a comma list",
    )


class McpSim:
    """What the `mcp_sim` fixture gives a test."""

    def __init__(self, seeds: list[int] | None) -> None:
        #: The seeds from `--mcp-sim-seeds`, or `None` for each probe's own.
        self.seeds = seeds

    def probe(self, command: str | Sequence[str] | None = None, **kwargs: Any) -> list[Report]:
        """Probes on every seed and fails the test unless each passes; returns the reports."""
        own = kwargs.pop("seed", 0)
        seeds = self.seeds if self.seeds is not None else [own]
        reports = [probe(command, seed=s, **kwargs) for s in seeds]
        fail_unless_ok(reports)
        return reports

    def sweep(self, command: str | Sequence[str], **kwargs: Any) -> SweepReport:
        """Sweeps the server virtually (`mcp_sim.sweep`) and fails the test unless the sweep
        passes: every failing or not-replayable seed is listed with its replay line."""
        if self.seeds is not None:
            lo, hi = min(self.seeds), max(self.seeds) + 1
            if sorted(self.seeds) != list(range(lo, hi)):
                raise pytest.UsageError("--mcp-sim-seeds: a sweep takes a range A..B")
            kwargs["seeds"] = range(lo, hi)
        report = sweep(command, **kwargs)
        if not report.ok:
            pytest.fail(f"mcp-sim sweep --virtual did not pass:\n{report.summary()}", pytrace=False)
        return report

    def check_trace(self, path: str | os.PathLike[str], **kwargs: Any) -> Report:
        """Judges a trace and fails the test unless it passes."""
        report = check_trace(path, **kwargs)
        fail_unless_ok([report])
        return report


def fail_unless_ok(reports: Sequence[Report]) -> None:
    """Fails the running test with the whole text of every report that did not pass."""
    failed = [r for r in reports if not r.ok]
    if failed:
        text = "\n\n".join(r.summary() for r in failed)
        pytest.fail(f"{len(failed)} of {len(reports)} mcp-sim runs failed:\n{text}", pytrace=False)


@pytest.fixture
def mcp_sim(request: pytest.FixtureRequest) -> McpSim:
    """Probes servers and judges traces, failing the test with the report and replay line."""
    text = request.config.getoption("--mcp-sim-seeds")
    try:
        seeds = parse_seeds(text) if text else None
    except ValueError as e:
        raise pytest.UsageError(f"--mcp-sim-seeds: {e}") from e
    return McpSim(seeds)
