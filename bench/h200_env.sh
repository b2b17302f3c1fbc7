# Sourced by the bench/h200_*.sh scripts: sleuth importable as `sleuth` from this checkout on
# a GPU host that has python3 but none of sleuth's dependencies (their wheels in .whl/,
# installed offline), $OUT ready, unbuffered output. Run from the repository root.
set -uo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
REPO=$PWD
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
mkdir -p /tmp/pkg && ln -sfn "$REPO" /tmp/pkg/sleuth && export PYTHONPATH=/tmp/pkg:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1
