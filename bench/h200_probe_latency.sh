#!/usr/bin/env bash
# bench/probe_latency.py on a host with many cores (the device tool's H200: 16), where the
# far ends, both sshds and sleuth need not share two cores. The device has no OpenSSH: a
# copy of this machine's (Debian 12) sshd, ssh and ssh-keygen with their libraries may be
# carried in .sshbin/ (bin/ wrappers set LD_LIBRARY_PATH to lib/ for them alone).
# Writes JSON to $OUT (or ./out).   bash bench/h200_probe_latency.sh [probe_latency args]
source "$(dirname "$0")/h200_env.sh"
if ! command -v sshd > /dev/null && [ -d .sshbin ]; then export PATH=$REPO/.sshbin/bin:$PATH; fi
if [ "$(id -u)" = 0 ] && ! getent passwd sshd > /dev/null; then useradd -r -d /run/sshd -s /usr/sbin/nologin sshd; fi
export PYTHONUNBUFFERED=1
[ $# -gt 0 ] || set -- --runs 9 --megabytes 200 --pairs 5
nproc; command -v sshd; sshd -V 2>&1 | head -1
python3 bench/probe_latency.py "$@" --json > "$OUT/probe_latency.json" 2> "$OUT/probe_latency.err"
echo "exit $?"; cat "$OUT/probe_latency.json"; tail -5 "$OUT/probe_latency.err"
