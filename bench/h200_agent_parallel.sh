#!/usr/bin/env bash
# bench/agent_parallel.py on the device's 16 cores: eight probes at once on one agent vs one
# (the local target: no sshd), with the agent's, the children's and sleuth's CPU per run.
# Writes JSON to $OUT (or ./out).   bash bench/h200_agent_parallel.sh
source "$(dirname "$0")/h200_env.sh"
nproc
python3 bench/agent_parallel.py --json > "$OUT/agent_parallel.json" 2> "$OUT/agent_parallel.err"
echo "exit $?"; cat "$OUT/agent_parallel.json"; tail -5 "$OUT/agent_parallel.err"
