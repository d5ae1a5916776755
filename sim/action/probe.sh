#!/usr/bin/env bash
# The steps of the mcp-sim GitHub Action (action.yml): install mcp-sim, probe, print the
# findings as annotations (`--format github`), exit as the probe did.
#
# Inputs, from the environment: MCP_SIM_INSTALL (pip or npm), MCP_SIM_PACKAGE (what to
# install, split on spaces), MCP_SIM_COMMAND or MCP_SIM_URL, MCP_SIM_SEED, MCP_SIM_ERA,
# MCP_SIM_BASELINE, MCP_SIM_ARGS (split on spaces). RUNNER_TEMP is where it installs.
set -euo pipefail

: "${MCP_SIM_INSTALL:=pip}" "${MCP_SIM_SEED:=0}" "${MCP_SIM_ERA:=auto}"
: "${MCP_SIM_COMMAND:=}" "${MCP_SIM_URL:=}" "${MCP_SIM_BASELINE:=}" "${MCP_SIM_ARGS:=}"
if [[ -z "${MCP_SIM_PACKAGE:-}" ]]; then
    echo "::error title=mcp-sim::package names no wheel or tarball to install"
    exit 2
fi
home="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/mcp-sim-action"
# Each word a package spec or a file; a glob (dist/*.whl) names the files it matches.
read -r -a words <<<"$MCP_SIM_PACKAGE"
packages=()
for word in "${words[@]}"; do
    # shellcheck disable=SC2206 # the glob is meant to expand
    matches=($word)
    packages+=("${matches[@]}")
done

case "$MCP_SIM_INSTALL" in
pip)
    python3 -m venv "$home/venv"
    "$home/venv/bin/pip" install --quiet --disable-pip-version-check "${packages[@]}"
    mcp_sim="$home/venv/bin/mcp-sim"
    ;;
npm)
    mkdir -p "$home/npm"
    npm install --prefix "$home/npm" --no-audit --no-fund --silent "${packages[@]}"
    mcp_sim="$home/npm/node_modules/.bin/mcp-sim"
    ;;
*)
    echo "::error title=mcp-sim::install must be pip or npm, not '$MCP_SIM_INSTALL'"
    exit 2
    ;;
esac

probe=("$mcp_sim" probe --format github --seed "$MCP_SIM_SEED" --era "$MCP_SIM_ERA")
if [[ -n "$MCP_SIM_BASELINE" ]]; then
    probe+=(--baseline "$MCP_SIM_BASELINE")
fi
read -r -a extra <<<"$MCP_SIM_ARGS"
probe+=("${extra[@]}")
if [[ -n "$MCP_SIM_URL" && -z "$MCP_SIM_COMMAND" ]]; then
    probe+=(--url "$MCP_SIM_URL")
elif [[ -n "$MCP_SIM_COMMAND" && -z "$MCP_SIM_URL" ]]; then
    read -r -a server <<<"$MCP_SIM_COMMAND"
    probe+=(-- "${server[@]}")
else
    echo "::error title=mcp-sim::give the command or the url of the server to probe, not both"
    exit 2
fi
echo "${probe[*]}" >&2
exec "${probe[@]}"
