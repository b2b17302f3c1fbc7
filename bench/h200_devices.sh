#!/usr/bin/env bash
# On a GPU host (the device tool's H200): the `--devices` path of the example drafter on
# every GPU there is, and a `gpus` fleet (one member per CUDA_VISIBLE_DEVICES index, found
# with nvidia-smi) fingerprinted through sleuth's CLI. Writes JSON to $OUT (or ./out).
#   bash bench/h200_devices.sh      (wheels for sleuth's own dependencies in .whl/)
source "$(dirname "$0")/h200_env.sh"
nvidia-smi -L | tee "$OUT/gpus.txt"
DEVICES=$(nvidia-smi --query-gpu=index --format=csv,noheader | sed 's/^/cuda:/' | paste -sd, -)
echo "devices: $DEVICES"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.device_count())"

# 1. the drafter across every device: 3 cold trials, the concurrent-compile face
for remedy in none; do
  /usr/bin/time -f "%e s" python3 examples/drafter/train.py --devices "$DEVICES" --threads 4 --race compile \
    --cold-cache --trials 3 --steps 30 > "$OUT/drafter_devices.txt" 2> "$OUT/drafter_devices.err"
  echo "drafter exit $?"; tail -1 "$OUT/drafter_devices.txt"
done

# 2. a gpus fleet through the CLI
P=/tmp/fleetproj; rm -rf $P; mkdir -p $P; cd $P
printf '[targets.box]\npython = "python3"\nmembers = { gpus = "all" }\n' > sleuth.toml
python3 -m sleuth init > /dev/null
python3 -m sleuth probe run env-fingerprint --target box --json > "$OUT/fleet_gpus.json" 2> "$OUT/fleet_gpus.err"
echo "fleet exit $?"
python3 - "$OUT/fleet_gpus.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(d["headline"]); print("members:", d["members"])
PY
python3 -m sleuth events | grep -E "fleet|run #" | head -20
python3 -m sleuth agent status; python3 -m sleuth agent stop
