# Run on a GPU machine from the repository root, with .venv/bin/py-spy carried (issue 32): a
# CUDA job whose host thread waits on the GPU (a long kernel, then torch.cuda.synchronize; and
# a blocking event's synchronize) read by the stacks probe with native frames: is it read as
# "cuda sync" (waiting on the GPU), not as a collective, and not as stuck without a reason?
REPO=$(pwd)
python -c "import torch;print(torch.__version__, torch.cuda.get_device_name())"
W=$(mktemp -d)
ln -s "$REPO" "$W/sleuth"
cat > $W/spin.py <<'J'
import os, torch
x = torch.ones(1, device="cuda"); torch.cuda.synchronize()
open(os.environ["READY"], "w").write("ok")
while True:
    torch.cuda._sleep(int(2e11))   # the GPU is busy for a long time; the host waits
    torch.cuda.synchronize()
J
cat > $W/event.py <<'J'
import os, torch
x = torch.ones(1, device="cuda"); torch.cuda.synchronize()
open(os.environ["READY"] + "2", "w").write("ok")
while True:
    torch.cuda._sleep(int(2e11))
    e = torch.cuda.Event(blocking=True); e.record(); e.synchronize()
J
export READY=$W/r
RANK=0 WORLD_SIZE=1 MASTER_PORT=1 python $W/spin.py > $W/j1.log 2>&1 & P1=$!
RANK=0 WORLD_SIZE=1 MASTER_PORT=2 python $W/event.py > $W/j2.log 2>&1 & P2=$!
for i in $(seq 1 90); do [ -f $W/r ] && [ -f $W/r2 ] && break; sleep 1; done
sleep 3; cat $W/j1.log $W/j2.log | tail -3
mkdir -p $W/bin && cp $REPO/.venv/bin/py-spy $W/bin/
cd $W && PATH=$W/bin:$PATH P1=$P1 P2=$P2 python - <<'P'
import json, os, sys, time
import importlib.util
folder = os.path.join(os.getcwd(), "sleuth", "hypotheses", "hang")  # a package: its modules import each other only
spec = importlib.util.spec_from_file_location("hang", os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
hang = importlib.util.module_from_spec(spec); sys.modules["hang"] = hang; spec.loader.exec_module(hang)
analyze_stacks = hang.analyze_stacks  # the reading alone: pure, standard library (no tomlkit on the device)
src = open(os.path.join(os.getcwd(), "sleuth", "probes", "scripts", "stacks.py")).read()
out = {}
for name in ("P1", "P2"):
    recs = []
    g = {"emit": lambda kind, **f: recs.append({"kind": kind, **f}), "params": {"pid": os.environ[name]}}
    t = time.time()
    exec(compile(src, "stacks.py", "exec"), g)
    took = time.time() - t
    found = analyze_stacks(recs)
    row = found["per_rank"][0]
    out[name] = {"took_s": round(took, 2), "verdict": found["verdict"], "sentences": found["sentences"],
                 "state": row["state"], "states": row["states"], "cpu_s": row["cpu_s"], "native_wait": row["native_wait"],
                 "native_elsewhere": row.get("native_wait_elsewhere"),
                 "native_top": [f[0] for f in (next(r for r in recs if r["kind"] == "rank")["native"] or {}).get("threads", [{}])[0].get("frames", [])[:8]]}
print(json.dumps(out, indent=1))
json.dump(out, open(os.environ["OUT"] + "/gpu_wait_native.json", "w"), indent=1)
P
kill $P1 $P2; true
