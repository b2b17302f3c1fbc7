"""A drafter built on HuggingFace transformers, as a user writes one (not sleuth's code): the
GPU form of tests/fixtures/hf_drafter/train.py, every weight trained on CUDA (flex_attention's
backward included), for bench/gpu/race_rate.sh.

Several worker threads, each with its own copy of a tiny random-init Llama using
attn_implementation="flex_attention", train the LM head on random tokens. Nothing is
downloaded. The script has its own argparse: sleuth must run it as written.

    python train.py --workers 3 --steps 20
"""

import argparse
import copy
import threading

import torch
from transformers import LlamaConfig, LlamaForCausalLM


# --- sleuth: lock remedy, first pass ------------------------------------------------------
# The compile these worker threads need happens inside a library (transformers compiles
# flex_attention and the block mask itself). While one thread compiles, torch's compile state
# is process-global (the FX tracing flag; torch.compiler.is_compiling() answers True on every
# thread): another thread running the model meanwhile takes the library's compile-time branch
# and dies, or runs flex_attention uncompiled. Each worker's first pass through its loop runs
# alone, so its compiles finish before any other thread runs a pass; later passes run
# together, never beside a first pass. One gate per process, whichever remedied module is
# imported first. Added by sleuth; remove with `sleuth remedy revert`.
import threading as _sleuth_threading


class _SleuthFirstPass:
    def __init__(self):
        self._cond = _sleuth_threading.Condition()
        self._first = False  # a thread is in its first pass
        self._waiting = 0  # threads waiting for their first pass: they go before later passes
        self._passes = 0  # later passes running
        self._here = _sleuth_threading.local()

    def __enter__(self):
        here = self._here
        depth = getattr(here, "depth", 0)
        here.depth = depth + 1
        if depth:  # a pass inside a pass: the outer one holds the gate
            return self
        here.first = not getattr(here, "passed", False)
        with self._cond:
            if here.first:
                self._waiting += 1
                while self._first or self._passes:
                    self._cond.wait()
                self._waiting -= 1
                self._first = True
            else:
                while self._first or self._waiting:
                    self._cond.wait()
                self._passes += 1
        return self

    def __exit__(self, *exc):
        here = self._here
        here.depth -= 1
        if here.depth:
            return False
        with self._cond:
            if here.first:
                self._first = False
                here.passed = True
            else:
                self._passes -= 1
            self._cond.notify_all()
        return False


_SLEUTH_FIRST_PASS = _sleuth_threading.__dict__.setdefault("_sleuth_first_pass", _SleuthFirstPass())

# --- end sleuth ---------------------------------------------------------------------------



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    args = ap.parse_args()

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    config._attn_implementation = "flex_attention"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    base = LlamaForCausalLM(config).to(device)
    print(config)  # the config dump users keep in their logs

    failed = []

    def drafter(i):
        model = copy.deepcopy(base)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)  # the whole model: CUDA has flex's backward
        first = last = None
        try:
            for step in range(args.steps):
                with _SLEUTH_FIRST_PASS:
                    ids = torch.randint(0, 256, (1, args.seq), generator=torch.Generator().manual_seed(100 * i + step)).to(device)
                    out = model(input_ids=ids, labels=ids)
                    out.loss.backward()
                    opt.step()
                    opt.zero_grad()
                    first = first if first is not None else out.loss.item()
                    last = out.loss.item()
            print(f"drafter-{i}: OK (loss {first:.3f} -> {last:.3f})", flush=True)
        except Exception:
            failed.append(i)
            raise

    threads = [threading.Thread(target=drafter, args=(i,), name=f"drafter-{i}") for i in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise SystemExit(f"{len(failed)} of {args.workers} drafters failed")


if __name__ == "__main__":
    main()
