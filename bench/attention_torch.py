"""PyTorch baseline for `gpu-bench attention`: causal attention forward at one shape.

Times `torch.nn.functional.scaled_dot_product_attention(..., is_causal=True)` (PyTorch picks its
fastest backend: flash or cuDNN) and the materialised path (`q @ k.T`, causal mask, softmax,
`@ v`) with CUDA events: warm-up launches, then the median of the timed ones, each on random
inputs. Prints one JSON object on stdout. Called by `gpu-bench attention` when PyTorch is
importable; the GPU bundle carries this file.
"""

import argparse
import json
import math
import statistics

import torch
import torch.nn.functional as F


def median_ms(fn, warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--b", type=int, required=True)
    parser.add_argument("--t", type=int, required=True)
    parser.add_argument("--nh", type=int, required=True)
    parser.add_argument("--hd", type=int, required=True)
    parser.add_argument("--dtype", choices=["bf16", "f16"], required=True)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--reps", type=int, default=25)
    args = parser.parse_args()

    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    shape = (args.b, args.nh, args.t, args.hd)
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
    mask = torch.ones(args.t, args.t, device="cuda", dtype=torch.bool).tril()
    scale = 1.0 / math.sqrt(args.hd)

    def sdpa():
        F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def materialised():
        att = (q @ k.transpose(-2, -1)) * scale
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        att @ v

    print(json.dumps({
        "torch": torch.__version__,
        "sdpa_ms": median_ms(sdpa, args.warmup, args.reps),
        "materialised_ms": median_ms(materialised, args.warmup, args.reps),
    }))


if __name__ == "__main__":
    main()
