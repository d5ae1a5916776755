"""A server that answers each cancel: every seed fails, with the rule, its level and the
replay line in the failure's text; and a server that swallows cancels, swept virtually, fails
with the rule and each failing seed's replay line."""

from conftest import FLAGS, SERVERS


def test_the_answer_cancel_server(mcp_sim):
    mcp_sim.probe(SERVERS["answer-cancel"], seed=1, args=FLAGS)


def test_the_swallow_cancel_server_swept_virtually(mcp_sim):
    mcp_sim.sweep(SERVERS["swallow-cancel"], tool_args={"steps": 5, "step_ms": 1000})
