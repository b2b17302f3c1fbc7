# Run on a GPU machine from the repository root, with .venv/bin/py-spy carried: does a host
# thread waiting on the GPU (a long kernel, then synchronize) spin on CPU? If it does, stacks
# must read such ranks as busy, not moving (hypotheses/hang/ _spinning). Not yet run: no
# device was lent when it was written.
REPO=$(pwd)
python -c "import torch;print(torch.__version__)"
W=$(mktemp -d)
cat > $W/job.py <<'J'
import os, time, torch
torch.cuda.init()
x = torch.ones(1, device="cuda"); torch.cuda.synchronize()
open(os.environ["READY"], "w").write("ok")
while True:
    torch.cuda._sleep(int(2e11))   # a kernel that runs for a long time: the GPU is busy, the host waits
    torch.cuda.synchronize()
J
cat > $W/sched.py <<'J'
import os, time, torch
torch.cuda.init()
torch.cuda.set_sync_debug_mode(0)
x = torch.ones(1, device="cuda"); torch.cuda.synchronize()
open(os.environ["READY2"], "w").write("ok")
while True:
    torch.cuda._sleep(int(2e11))
    e = torch.cuda.Event(blocking=True); e.record(); e.synchronize()
J
export READY=$W/r1 READY2=$W/r2
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 timeout 100 python $W/job.py > $W/j1.log 2>&1 &
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_PORT=1 timeout 100 python $W/sched.py > $W/j2.log 2>&1 &
for i in $(seq 1 60); do [ -f $READY ] && [ -f $READY2 ] && break; sleep 1; done
sleep 3; cat $W/j1.log $W/j2.log | tail -5
mkdir -p $W/bin && cp $REPO/.venv/bin/py-spy $W/bin/
cd $W && PATH=$W/bin:$PATH python $REPO/probes/scripts/stacks.py > $OUT/stacks.jsonl 2> $OUT/stacks.err
tail -3 $OUT/stacks.err
cd $REPO
python - <<'P'
import json, os
for line in open(os.environ["OUT"] + "/stacks.jsonl"):
    r = json.loads(line)
    if r["kind"] == "rank":
        main = [t for t in r["tasks"] if t["tid"] == r["pid"]][0]
        print(r["pid"], r.get("job"), "main:", main)
        s = r["samples"][-1]
        if isinstance(s, list):
            for t in s:
                if t["name"] == "MainThread": print("   ", t["frames"][:3])
    else:
        print({k: v for k, v in r.items() if k in ("kind", "finding", "text", "processes", "window_s")})
P
pkill -f job.py; pkill -f sched.py; true
