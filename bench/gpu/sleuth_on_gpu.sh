#!/usr/bin/env bash
# sleuth's race kit on a GPU, as a user drives it on the transformers drafter (tests/fixtures/hf_drafter/train.py,
# unchanged): reproduce with the single-thread control, find the compile sites, apply the lock in
# the user's file, verify, revert. Needs sleuth importable (WHEELS: a folder of its dependencies'
# wheels, for a machine without network).
set -eu
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUTDIR=${OUT:-/tmp/sleuth_on_gpu}
if [ -n "${WHEELS:-}" ]; then python3 -m pip install -q --no-index --find-links "$WHEELS" textual asyncssh networkx tomlkit libcst packaging; fi
PKG=$(mktemp -d); ln -s "$REPO" "$PKG/sleuth"
sleuth() { PYTHONPATH="$PKG" python3 -m sleuth "$@"; }
HUNT=$(mktemp -d); cd "$HUNT"; cp "$REPO/tests/fixtures/hf_drafter/train.py" .
sleuth init >/dev/null
cat > sleuth.toml <<TOML
[targets.local]
code = { local = "." }

[probes.compile-race]
entry = "train.py"
args = ["--steps", "20", "--seq", "128"]
threaded_args = ["--workers", "3"]
control_args = ["--workers", "1"]
trials = 5

[probes.fx-trace-state]
entry = "train.py"
args = ["--steps", "20", "--seq", "128", "--workers", "3"]
TOML
export SLEUTH_RACE_SIDE_BY_SIDE=${SLEUTH_RACE_SIDE_BY_SIDE:-3}  # a tiny model: three on one GPU is no memory fault
set +e
sleuth probe run compile-race | tail -15
sleuth probe run fx-trace-state | tail -8
sleuth remedy preview lock train.py | tail -3
sleuth remedy apply lock train.py
sleuth probe run compile-race --param trials=7 --param control=false | tail -12
sleuth remedy revert train.py
cmp train.py "$REPO/tests/fixtures/hf_drafter/train.py" && echo "reverted: byte for byte"
sleuth hypotheses
sleuth export -o "$OUTDIR/postmortem.md" >/dev/null && echo "postmortem: $OUTDIR/postmortem.md"
