"""A server that answers each cancel: every seed fails, with the rule, its level and the
replay line in the failure's text."""

from conftest import FLAGS, SERVERS


def test_the_answer_cancel_server(mcp_sim):
    mcp_sim.probe(SERVERS["answer-cancel"], seed=1, args=FLAGS)
