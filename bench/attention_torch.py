"""PyTorch baselines for `gpu-bench attention`: causal attention forward and backward at one shape.

For each implementation PyTorch offers -- `scaled_dot_product_attention(is_causal=True)` with its
default choice and pinned to each backend (flash, memory-efficient, cuDNN), and the materialised
path (`q @ k.T`, causal mask, softmax, `@ v`) -- times the forward and the backward
(`torch.autograd.grad` of the output with respect to q, k, v) with CUDA events: warm-up
launches, then the median of the timed ones, on random inputs. A backend that cannot run here is
reported with its error instead of times. Prints one JSON object on stdout. Called by
`gpu-bench attention` when PyTorch is importable; the GPU bundle carries this file.
"""

import argparse
import json
import math
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


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


def measure(attention, q, k, v, warmup: int, reps: int) -> dict:
    """Forward and backward medians of `attention(q, k, v)`."""
    fwd = median_ms(lambda: attention(q, k, v), warmup, reps)
    qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
    out = attention(qg, kg, vg)
    dout = torch.randn_like(out)
    bwd = median_ms(
        lambda: torch.autograd.grad(out, (qg, kg, vg), dout, retain_graph=True), warmup, reps
    )
    return {"fwd_ms": fwd, "bwd_ms": bwd}


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
    scale = 1.0 / math.sqrt(args.hd)
    mask = torch.ones(args.t, args.t, device="cuda", dtype=torch.bool).tril()

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def pinned(backend):
        def run(q, k, v):
            with sdpa_kernel(backend):
                return sdpa(q, k, v)

        return run

    def materialised(q, k, v):
        att = (q @ k.transpose(-2, -1)) * scale
        return att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v

    implementations = {
        "SDPA default": sdpa,
        "SDPA flash": pinned(SDPBackend.FLASH_ATTENTION),
        "SDPA efficient": pinned(SDPBackend.EFFICIENT_ATTENTION),
        "SDPA cuDNN": pinned(SDPBackend.CUDNN_ATTENTION),
        "materialised (PyTorch)": materialised,
    }
    rows = []
    for name, attention in implementations.items():
        try:
            rows.append({"impl": name, **measure(attention, q, k, v, args.warmup, args.reps)})
        except Exception as err:  # a backend unavailable for this GPU, dtype or shape
            rows.append({"impl": name, "error": str(err).splitlines()[0][:200]})
        torch.cuda.empty_cache()
    print(json.dumps({"torch": torch.__version__, "rows": rows}))


if __name__ == "__main__":
    main()
