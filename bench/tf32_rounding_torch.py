"""How TF32 operand rounding moves GPT-2's training losses: truncation against round-to-nearest.

On Hopper, `wgmma` reads an f32 operand by its upper 19 bits (truncation), where `mma.sync`
kernels round it to nearest first (`cvt.rna.tf32.f32`). This script measures what that difference
does to training, on the CPU, with no GPU: ladder_torch.py's GPT-2 (124M by default), trained
--steps steps from a GPT-2 initialisation (seed 0; std 0.02, the residual projections
0.02/sqrt(2L)) on the bundled Shakespeare shard with the ladder's AdamW, once per --modes entry:

    fp32   every matmul in f32
    trunc  every linear layer (and the tied classifier) with both operands truncated to TF32, in
           the forward GEMM and in both backward GEMMs (dX = dY·W, dW = dYᵀ·X); f32 accumulation
    rna    the same with the operands rounded to nearest, ties away from zero (cvt.rna)

It prints each step's loss and, for trunc and rna, the difference from fp32's: the drift the
ladder's tf32 rung reports. Attention's matmuls stay in f32 in every mode.

Measured (2026-11-26, 2 CPU cores, B=8, T=512, 4 steps; differences from fp32 at steps 0..3):
trunc -2.2e-4 -9.9e-4 -7.6e-3 -3.5e-3, rna -1.6e-5 +1.3e-4 -1.6e-4 -4.9e-5. The H200's tf32 rung
(bench/ladder-nvidia-h200-fp32-tf32-bf16.md, wgmma forward GEMMs) started at -2e-4 and drifted
-1.7e-2 by step 2 at B=16, T=1024; PyTorch's stayed within 5e-3.
"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ladder_torch as lt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tf32(x: torch.Tensor, mode: str) -> torch.Tensor:
    """`x` with its low 13 mantissa bits dropped (trunc) or rounded away (rna); fp32: `x`."""
    if mode == "fp32":
        return x
    bits = x.contiguous().view(torch.int32)
    if mode == "rna":
        bits = bits + 0x1000  # half a TF32 ulp: ties go away from zero
    return (bits & ~0x1FFF).view(torch.float32)


def tf32_linear(mode: str):
    """F.linear with TF32 operands in the forward product and both backward products."""

    class Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            ctx.has_bias = b is not None
            y = tf32(x, mode) @ tf32(w, mode).t()
            return y + b if b is not None else y

        @staticmethod
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            dy_q = tf32(dy, mode)
            dx = dy_q @ tf32(w, mode)
            dw = dy_q.reshape(-1, dy.shape[-1]).t() @ tf32(x, mode).reshape(-1, x.shape[-1])
            db = dy.reshape(-1, dy.shape[-1]).sum(0) if ctx.has_bias else None
            return dx, dw, db

    return lambda x, w, b=None: Linear.apply(x, w, b)


def train(mode: str, args, tokens: torch.Tensor) -> list:
    F.linear = tf32_linear(mode)
    cfg = {"maxT": 1024, "V": 50257, "L": args.layers, "NH": 12, "C": 768, "Vp": 50304}
    torch.manual_seed(0)
    model = lt.GPT(cfg, cfg["V"], False, cfg["V"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                residual = "attproj" in name or "fcproj" in name
                p.normal_(0.0, 0.02 / math.sqrt(2 * cfg["L"]) if residual else 0.02)
            elif name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=6e-4,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    n = args.b * args.t
    losses = []
    for i in range(args.steps):
        window = tokens[i * n : (i + 1) * n + 1]
        x, y = window[:-1].view(args.b, args.t), window[1:].view(args.b, args.t)
        optimizer.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(decay + no_decay, 1.0)
        optimizer.step()
        losses.append(loss.item())
        print(f"{mode} step {i} loss {losses[-1]:.6f}", file=sys.stderr, flush=True)
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--b", type=int, default=8, help="batch size")
    parser.add_argument("--t", type=int, default=512, help="sequence length (at most 1024)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--modes", default="fp32,trunc,rna")
    parser.add_argument(
        "--data", default=os.path.join(ROOT, "data", "shakespeare", "train_000000.bin")
    )
    args = parser.parse_args()
    tokens = lt.load_tokens(args.data)
    if len(tokens) < args.steps * args.b * args.t + 1:
        sys.exit(f"{args.data}: too few tokens for {args.steps} steps of {args.b}x{args.t}")
    runs = {mode: train(mode, args, tokens) for mode in args.modes.split(",")}
    base = runs.get("fp32")
    for mode, losses in runs.items():
        line = " ".join(f"{l:.6f}" for l in losses)
        if base is not None and mode != "fp32":
            line += "   drift " + " ".join(f"{l - b:+.1e}" for l, b in zip(losses, base))
        print(f"{mode:5} {line}")


if __name__ == "__main__":
    main()
