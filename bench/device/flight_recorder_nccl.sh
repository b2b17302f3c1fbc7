# Run on a GPU machine from the repository root (the device tool): a one-rank NCCL job under
# sleuth's --hook, then the stacks probe standalone; shows which Flight Recorder holds NCCL's
# collectives (the result of 2026-12-05: docs/measurements/flight_recorder_nccl_h200_torch211.json).
set -x
REPO=$(pwd)
nvidia-smi -L; python -c "import torch;print(torch.__version__, torch.cuda.is_available())"
python - <<'P'
import torch._C._distributed_c10d as c
print("fr functions:", [n for n in dir(c) if "trace" in n.lower()])
P
which py-spy || echo "no py-spy"
W=$(mktemp -d); mkdir -p $W/hook/dumps
cp $REPO/probes/far/hook.py $W/hook/sitecustomize.py
cat > $W/job.py <<'J'
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
r = dist.get_rank(); torch.cuda.set_device(0)
t = torch.ones(1 << 20, device="cuda")
for i in range(5):
    dist.all_reduce(t)
torch.cuda.synchronize()
open(os.environ["READY"], "w").write("ok")
time.sleep(60)
J
export READY=$W/ready
PYTHONPATH=$W/hook SLEUTH_STACKS_DIR=$W/hook/dumps TORCH_FR_BUFFER_SIZE=2000 timeout 120 python -m torch.distributed.run --standalone --nproc-per-node 1 $W/job.py > $W/job.log 2>&1 &
for i in $(seq 1 90); do [ -f $READY ] && break; sleep 1; done
ls -la $W/hook/dumps; cat $W/job.log | tail -5
cd $W && python $REPO/probes/scripts/stacks.py > $OUT/stacks.jsonl 2> $OUT/stacks.err; cd - >/dev/null
ls -la $W/hook/dumps; cp $W/hook/dumps/fr-*.json $OUT/ 2>/dev/null
head -c 3000 $OUT/stacks.jsonl; tail -5 $OUT/stacks.err
pkill -f job.py; true
