#!/usr/bin/env bash
# On a host with more cores than members (the device tool's H200: 16 cores): how a fleet
# fan-out scales when the far ends do not have to share two cores with each other.
# Writes JSON to $OUT (or ./out).   bash bench/h200_fleet_scale.sh
source "$(dirname "$0")/h200_env.sh"
nproc; python3 --version
for n in 16 8 32; do
  python3 bench/fleet_scale.py --runs 9 --members $n --json > "$OUT/fleet_scale_$n.json" 2> "$OUT/fleet_scale_$n.err"
  echo "members $n exit $?"; cat "$OUT/fleet_scale_$n.json"; tail -3 "$OUT/fleet_scale_$n.err"
done
