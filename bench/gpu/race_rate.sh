#!/usr/bin/env bash
# Reproduction rate of the transformers drafter's compile race on a GPU (tests/fixtures/hf_drafter/
# train.py, which trains every weight where CUDA is), before and after sleuth's lock remedy (train_locked.py: train.py after `sleuth remedy apply lock train.py`, made
# here each time; WHEELS: a folder of sleuth's dependencies' wheels, for a machine without network). Each run is a fresh process on a cold inductor/triton cache of its
# own; PAR runs side by side. Prints one line per variant: failed runs of N, and why they died.
#   bash bench/gpu/race_rate.sh N PAR [ARGS...]     (e.g. 10 5 --workers 3 --steps 20)
set -u
N=${1:-10}; PAR=${2:-5}; shift 2 || true
ARGS=("$@")
HERE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${OUT:-/tmp/race_rate}
mkdir -p "$OUTDIR"
REPO=$(cd "$HERE/../.." && pwd)
DRAFTER="$REPO/tests/fixtures/hf_drafter/train.py"
if [ -n "${WHEELS:-}" ]; then python3 -m pip install -q --no-index --find-links "$WHEELS" textual asyncssh networkx tomlkit libcst packaging; fi
PKG=$(mktemp -d); ln -s "$REPO" "$PKG/sleuth"
LOCKED=$(mktemp -d); cp "$DRAFTER" "$LOCKED/"
(cd "$LOCKED" && PYTHONPATH="$PKG" python3 -m sleuth init >/dev/null && PYTHONPATH="$PKG" python3 -m sleuth remedy apply lock train.py >/dev/null) \
  || { echo "race_rate: sleuth could not apply the lock (WHEELS?)" >&2; exit 2; }
cp "$LOCKED/train.py" "$OUTDIR/train_locked.py"; cp "$DRAFTER" "$OUTDIR/train.py"
python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.get_device_name())"
for variant in train train_locked; do
  log="$OUTDIR/$variant"
  mkdir -p "$log"
  start=$(date +%s)
  src=$OUTDIR
  seq 1 "$N" | xargs -P "$PAR" -I{} bash -c '
    d=$(mktemp -d); 
    TORCHINDUCTOR_CACHE_DIR=$d/inductor TRITON_CACHE_DIR=$d/triton timeout 540 python "$0/$1.py" "${@:3}" >"$2/{}.out" 2>"$2/{}.err"
    echo $? >"$2/{}.rc"; rm -rf "$d"' "$src" "$variant" "$log" "${ARGS[@]}"
  failed=0; reasons=""
  for i in $(seq 1 "$N"); do
    rc=$(cat "$log/$i.rc")
    if [ "$rc" != 0 ]; then
      failed=$((failed+1))
      reasons+="$(grep -hoE '^(RuntimeError|TypeError|AssertionError|[A-Za-z]+Error): .{0,90}' "$log/$i.err" | sort | uniq -c | sort -rn | head -1 | sed 's/^ *//')"$'\n'
    fi
  done
  echo "$variant: $failed of $N runs failed ($(( $(date +%s) - start )) s)"
  printf '%s' "$reasons" | sort | uniq -c | sort -rn | head -5
done
