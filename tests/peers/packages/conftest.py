import json
import os

SERVERS = json.loads(os.environ["MCP_SIM_TEST_SERVERS"])
FLAGS = json.loads(os.environ["MCP_SIM_TEST_FLAGS"])
BASELINES = json.loads(os.environ.get("MCP_SIM_TEST_BASELINES", "{}"))
