"""Servers that pass: the pinned Python SDK server, and the TypeScript SDK server with its
known finding in a baseline."""

import mcp_sim as sim
from conftest import BASELINES, FLAGS, SERVERS


def test_the_python_sdk_server_passes(mcp_sim):
    (report,) = mcp_sim.probe(SERVERS["python-sdk"], seed=1, args=FLAGS)
    assert report.verdict == "clean", report.summary()
    assert report.replay.startswith("mcp-sim probe --seed 1"), report.replay


def test_the_typescript_sdk_server_passes_with_its_baseline(mcp_sim):
    reports = mcp_sim.probe(
        SERVERS["typescript-sdk"], seed=1, args=FLAGS, baseline=BASELINES["typescript-sdk"]
    )
    assert all(r.ok for r in reports)


def test_the_python_sdk_server_sweeps_under_the_virtual_clock(mcp_sim):
    report = mcp_sim.sweep(SERVERS["python-sdk"], seeds=range(0, 8), tool_args={"steps": 5, "step_ms": 1000})
    assert report.runs == 8 and len(report.traces) == 16, report.summary()
    assert not report.failing and not report.not_replayable, report.summary()


def test_flags_given_as_a_dict_are_a_type_error_that_says_so():
    import pytest

    with pytest.raises(TypeError, match="tool_args"):
        sim.sweep(SERVERS["python-sdk"], args={"steps": 6})


def test_a_trace_is_judged_too(tmp_path):
    trace = tmp_path / "trace.jsonl"
    report = sim.probe(SERVERS["python-sdk"], seed=1, args=[*FLAGS, "--trace", str(trace)])
    assert report.ok, report.summary()
    judged = sim.check_trace(trace)
    assert judged.ok and judged.era == report.era, judged.summary()
    assert judged.replay == f"mcp-sim check-trace {trace}"


def test_bad_usage_is_a_typed_error_naming_it():
    import pytest

    with pytest.raises(sim.McpSimError, match=r"mcp-sim probe exited 2: .*nope"):
        sim.probe(SERVERS["python-sdk"], era="nope")
