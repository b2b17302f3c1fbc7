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
