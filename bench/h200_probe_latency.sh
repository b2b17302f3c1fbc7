#!/usr/bin/env bash
# bench/probe_latency.py on a host with many cores (the device tool's H200: 16), where the
# far ends, both sshds and sleuth need not share two cores. The device has no OpenSSH: a
# copy of this machine's (Debian 12) sshd, ssh and ssh-keygen with their libraries may be
# carried in .sshbin/ (bin/ wrappers set LD_LIBRARY_PATH to lib/ for them alone).
# Writes JSON to $OUT (or ./out).   bash bench/h200_probe_latency.sh [probe_latency args]
set -uo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
REPO=$PWD
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
mkdir -p /tmp/pkg && ln -sfn "$REPO" /tmp/pkg/sleuth && export PYTHONPATH=/tmp/pkg:${PYTHONPATH:-}
if ! command -v sshd > /dev/null && [ -d .sshbin ]; then export PATH=$REPO/.sshbin/bin:$PATH; fi
if [ "$(id -u)" = 0 ] && ! getent passwd sshd > /dev/null; then useradd -r -d /run/sshd -s /usr/sbin/nologin sshd; fi
export PYTHONUNBUFFERED=1
[ $# -gt 0 ] || set -- --runs 9 --megabytes 200 --pairs 5
nproc; command -v sshd; sshd -V 2>&1 | head -1
python3 bench/probe_latency.py "$@" --json > "$OUT/probe_latency.json" 2> "$OUT/probe_latency.err"
echo "exit $?"; cat "$OUT/probe_latency.json"; tail -5 "$OUT/probe_latency.err"
