"""PyTorch side of `trainer ladder`: GPT-2 training throughput and first losses, one rung at a time.

The speed ladder of Karpathy's "Let's reproduce GPT-2": each rung adds one change to the rung
before it. This script trains the llm.c checkpoint `--checkpoint` on the token shard `--data` in
PyTorch for `--warmup` untimed and then `--steps` timed steps per rung, starting every rung afresh
(a new model from the checkpoint's parameters, a new optimizer, window 0 of the shard), and prints
one JSON object per rung on stdout, one a line, flushed as the rung finishes:

    {"rung", "ok": true, "torch", "device", "config", "step_ms", "median_ms", "tokens_per_sec",
     "losses", "ops"}

`step_ms` holds the timed steps (wall clock between `torch.cuda.synchronize()` before and after
each step; `time.perf_counter` alone on the CPU), `median_ms` their median, `tokens_per_sec`
B*T/(median_ms/1000), and `losses` the loss of every step, warm-up steps included, in order.
With --op-times, `ops` is one more step under torch.profiler: {"clock": "cuda" or "cpu",
"total_ms", "ops": [{"op", "calls", "ms"}]}, the slowest kernels (by device self time) or, on
the CPU, operators (by host self time) first, or {"error"} where the profiler cannot run;
without it, null. A rung that cannot run here (no `torch.compile` backend, out of memory, ...)
or whose loss is not finite (JSON has no NaN) is printed as {"rung", "ok": false, "error"} and
the ladder goes on with the next one. Nothing else goes to stdout; progress and warnings go to stderr. Exits 2 with a
message naming the problem when an argument or a file is bad, else 0. `trainer ladder` calls it
and runs the same rungs with its own kernels on the same checkpoint and batches.

Rungs, in ladder order (`--rungs` picks some, run in the order given):

    rung   | change from the rung before         | in PyTorch
    -------+-------------------------------------+------------------------------------------------
    fp32   | (baseline)                          | set_float32_matmul_precision('highest'), TF32
           |                                     | off for cuBLAS and cuDNN, materialised causal
           |                                     | attention, eager, vocabulary V
    tf32   | TF32 matmuls                        | set_float32_matmul_precision('high'), TF32 on
           |                                     | for cuBLAS and cuDNN
    bf16   | bf16 mixed precision                | torch.autocast(dtype=torch.bfloat16) around
           |                                     | the forward pass and the loss
    fused  | kernel fusion                       | torch.compile(model)
    flash  | flash attention                     | F.scaled_dot_product_attention(is_causal=True)
    vocab  | padded vocabulary                   | all Vp rows of wte (50304 for GPT-2)
    fp16   | fp16 instead of bf16                | the vocab rung with autocast float16 and
           |                                     | torch.amp.GradScaler (dynamic loss scaling,
           |                                     | PyTorch's defaults: initial scale 2^16)

The model is llm.c's GPT-2 (nanoGPT's layout): token plus position embedding; per layer
x += attproj(attention(ln1(x))) and x += fcproj(gelu_tanh(fc(ln2(x)))); a final layernorm;
logits = x @ wte^T (the classifier is wte, tied). LayerNorm eps 1e-5, GELU the tanh
approximation, causal attention scaled by 1/sqrt(C/NH); the loss is the mean cross-entropy over
all B*T positions. Before the `vocab` rung the model has V rows of wte (wte[:V] of the checkpoint,
50257 for GPT-2, the "ugly number"); from `vocab` on it has all Vp rows, as nanoGPT does: the
padded rows (zero in llm.c's checkpoints) give logits of their own, which take part in the softmax
of the loss (and so those rows get gradients and are trained). With --loss-vocab real the loss
covers the first V logits only, as llm.c's (and the trainer's) does: then the padded rungs train
exactly the model the trainer trains, for checking its losses at the rung's precision.

Batches are the trainer's: window w of the shard is inputs = tokens[w*B*T : (w+1)*B*T] and
targets = tokens[w*B*T+1 : (w+1)*B*T+1], each viewed as (B, T); step i (from 0, warm-up steps
included) uses window i % ((ntokens - 1) // (B*T)). They are loaded to the device up front.

The optimizer is the trainer's: AdamW (fused on CUDA) at the constant rate --lr, with --beta1,
--beta2, --eps, and weight decay --weight-decay on the 2-D tensors (wte, wpe and the four linear
weights) and none on biases and layernorm parameters. Each step zeroes the gradients, runs the
forward pass and the loss, backward, clips the gradient norm to --grad-clip (no clipping when it
is 0) and steps, one micro-batch a step; loss.item() each step (a synchronisation; the trainer's
side has the same). torch._dynamo is reset between rungs.

Files are llm.c's, little endian: the checkpoint has a header of 256 int32 (magic 20240326,
version 3 for f32 or 5 for bf16 parameters, maxT, V, L, NH, C, Vp) and then wte (Vp, C),
wpe (maxT, C), ln1w, ln1b, qkvw (L, 3C, C), qkvb, attprojw, attprojb, ln2w, ln2b, fcw (L, 4C, C),
fcb, fcprojw (L, C, 4C), fcprojb, lnfw, lnfb; a token shard has a header of 256 int32 (magic
20240520, version 1, token count) and then the tokens as uint16. Read with torch.frombuffer (no
numpy needed).
"""

import argparse
import contextlib
import gc
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.utils import counters as dynamo_counters
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

MODEL_MAGIC = 20240326
SHARD_MAGIC = 20240520
HEADER_BYTES = 256 * 4
PROFILE_ROWS = 15  # the slowest kernels or operators --op-times reports per rung

# rung -> (tf32, autocast dtype, torch.compile, flash attention, padded vocabulary, loss scaler)
RUNGS = {
    "fp32": (False, None, False, False, False, False),
    "tf32": (True, None, False, False, False, False),
    "bf16": (True, torch.bfloat16, False, False, False, False),
    "fused": (True, torch.bfloat16, True, False, False, False),
    "flash": (True, torch.bfloat16, True, True, False, False),
    "vocab": (True, torch.bfloat16, True, True, True, False),
    "fp16": (True, torch.float16, True, True, True, True),
}


class BadInput(Exception):
    """An argument or input file that makes the whole ladder impossible (exit 2)."""


def read_file(path: str) -> bytearray:
    try:
        with open(path, "rb") as f:
            return bytearray(f.read())
    except OSError as err:
        raise BadInput(f"{path}: cannot read: {err.strerror or err}") from err


def int32s(buf: bytearray, count: int) -> list:
    return torch.frombuffer(buf, dtype=torch.int32, count=count).tolist()


def load_checkpoint(path: str):
    """Returns (config dict, list of the 16 parameter tensors as f32 on the CPU)."""
    buf = read_file(path)
    if len(buf) < HEADER_BYTES:
        raise BadInput(
            f"{path}: truncated checkpoint: {len(buf)} bytes, "
            f"less than the {HEADER_BYTES}-byte header"
        )
    h = int32s(buf, 256)
    if h[0] != MODEL_MAGIC:
        raise BadInput(f"{path}: not an llm.c checkpoint (magic {h[0]}, expected {MODEL_MAGIC})")
    if h[1] not in (3, 5):
        raise BadInput(
            f"{path}: unsupported checkpoint version {h[1]} (3 = f32 and 5 = bf16 are supported)"
        )
    maxT, V, L, NH, C, Vp = h[2:8]
    if min(maxT, V, L, NH, C, Vp) <= 0 or C % NH != 0 or Vp < V:
        raise BadInput(
            f"{path}: corrupt checkpoint header: maxT={maxT} V={V} L={L} NH={NH} C={C} Vp={Vp}"
        )
    shapes = [
        (Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
        (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,),
    ]  # fmt: skip
    nparams = sum(math.prod(s) for s in shapes)
    width = 4 if h[1] == 3 else 2
    expected = HEADER_BYTES + nparams * width
    if len(buf) != expected:
        what = "truncated" if len(buf) < expected else "corrupt"
        raise BadInput(
            f"{path}: {what} checkpoint: the header (version {h[1]}, {nparams} parameters) "
            f"announces {expected} bytes but the file has {len(buf)}"
        )
    dtype = torch.float32 if h[1] == 3 else torch.bfloat16
    flat = torch.frombuffer(buf, dtype=dtype, offset=HEADER_BYTES, count=nparams).float()
    tensors, at = [], 0
    for shape in shapes:
        n = math.prod(shape)
        tensors.append(flat[at : at + n].view(shape))
        at += n
    config = {"maxT": maxT, "V": V, "L": L, "NH": NH, "C": C, "Vp": Vp, "version": h[1]}
    return config, tensors


def load_tokens(path: str) -> torch.Tensor:
    """The shard's tokens as int64 on the CPU."""
    buf = read_file(path)
    if len(buf) < HEADER_BYTES:
        raise BadInput(
            f"{path}: truncated token shard: {len(buf)} bytes, "
            f"less than the {HEADER_BYTES}-byte header"
        )
    h = int32s(buf, 3)
    if h[0] != SHARD_MAGIC:
        raise BadInput(f"{path}: not an llm.c token shard (magic {h[0]}, expected {SHARD_MAGIC})")
    if h[1] != 1:
        raise BadInput(f"{path}: unsupported token shard version {h[1]} (expected 1)")
    if h[2] < 0:
        raise BadInput(f"{path}: corrupt token shard: negative token count {h[2]}")
    expected = HEADER_BYTES + 2 * h[2]
    if len(buf) != expected:
        what = "truncated" if len(buf) < expected else "corrupt"
        raise BadInput(
            f"{path}: {what} token shard: the header announces {h[2]} tokens ({expected} bytes) "
            f"but the file has {len(buf)} bytes"
        )
    # uint16 through int16: torch's uint16 has few kernels.
    raw = torch.frombuffer(buf, dtype=torch.int16, offset=HEADER_BYTES, count=h[2])
    return raw.to(torch.int64) & 0xFFFF


class Block(nn.Module):
    def __init__(self, C: int, NH: int, maxT: int, flash: bool):
        super().__init__()
        self.NH, self.flash = NH, flash
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.qkv = nn.Linear(C, 3 * C)
        self.attproj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)
        if not flash:
            mask = torch.ones(maxT, maxT, dtype=torch.bool).tril()
            self.register_buffer("mask", mask, persistent=False)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C3 = x.shape
        C = C3 // 3
        # columns [Q | K | V], head h owning columns h*C/NH.. of each
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in x.split(C, dim=2))
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.NH))
            att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
            y = att @ v
        return y.transpose(1, 2).contiguous().view(B, T, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attproj(self.attention(self.qkv(self.ln1(x))))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, cfg: dict, vocab: int, flash: bool, loss_vocab: int):
        super().__init__()
        C = cfg["C"]
        self.loss_vocab = loss_vocab  # the logits the loss covers: the first loss_vocab
        self.wte = nn.Embedding(vocab, C)
        self.wpe = nn.Embedding(cfg["maxT"], C)
        self.blocks = nn.ModuleList(
            Block(C, cfg["NH"], cfg["maxT"], flash) for _ in range(cfg["L"])
        )
        self.lnf = nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.lnf(x), self.wte.weight)  # tied classifier
        if self.loss_vocab < logits.size(-1):
            logits = logits[..., : self.loss_vocab]
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.view(-1))

    @torch.no_grad()
    def load(self, tensors: list) -> None:
        wte, wpe, ln1w, ln1b, qkvw, qkvb, apw, apb, ln2w, ln2b, fcw, fcb, fpw, fpb, lnfw, lnfb = (
            tensors
        )
        self.wte.weight.copy_(wte[: self.wte.num_embeddings])
        self.wpe.weight.copy_(wpe)
        for l, b in enumerate(self.blocks):
            for dst, src in (
                (b.ln1.weight, ln1w), (b.ln1.bias, ln1b), (b.qkv.weight, qkvw),
                (b.qkv.bias, qkvb), (b.attproj.weight, apw), (b.attproj.bias, apb),
                (b.ln2.weight, ln2w), (b.ln2.bias, ln2b), (b.fc.weight, fcw), (b.fc.bias, fcb),
                (b.fcproj.weight, fpw), (b.fcproj.bias, fpb),
            ):  # fmt: skip
                dst.copy_(src[l])
        self.lnf.weight.copy_(lnfw)
        self.lnf.bias.copy_(lnfb)


def describe(cfg: dict, rung: str, loss_vocab: str) -> str:
    tf32, amp, compile_, flash, padded, scaler = RUNGS[rung]
    parts = []
    if amp is None:
        parts.append("fp32, TF32 matmuls" if tf32 else "fp32, TF32 off")
    else:
        name = "bf16" if amp == torch.bfloat16 else "fp16"
        parts.append(f"autocast {name}" + (" with GradScaler" if scaler else ""))
        parts.append("TF32 matmuls" if tf32 else "TF32 off")
    parts.append("SDPA causal attention" if flash else "materialised attention")
    parts.append("torch.compile" if compile_ else "eager")
    parts.append(f"vocab {cfg['Vp'] if padded else cfg['V']}")
    if padded and loss_vocab == "real" and cfg["Vp"] > cfg["V"]:
        parts.append(f"loss over the first {cfg['V']} logits")
    return ", ".join(parts)


def set_tf32(on: bool) -> None:
    torch.set_float32_matmul_precision("high" if on else "highest")
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_rung(rung: str, cfg: dict, tensors: list, batches: list, args, device) -> dict:
    tf32, amp, compile_, flash, padded, use_scaler = RUNGS[rung]
    set_tf32(tf32)
    vocab = cfg["Vp"] if padded else cfg["V"]
    model = GPT(cfg, vocab, flash, vocab if args.loss_vocab == "padded" else cfg["V"])
    model.load(tensors)
    model.to(device)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    params = decay + no_decay
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(args.beta1, args.beta2),
        eps=args.eps,
        fused=device.type == "cuda",
    )
    scaler = torch.amp.GradScaler(device.type) if use_scaler else None
    forward = torch.compile(model) if compile_ else model
    dynamo_counters["inductor"].clear()

    def autocast():
        if amp is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=amp)

    def step(i: int) -> float:
        """Training step i (window i); returns its loss (read back: a synchronisation)."""
        x, y = batches[i % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = forward(x, y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            if args.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            if args.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
            optimizer.step()
        return loss.item()

    losses, step_ms = [], []
    for i in range(args.warmup + args.steps):
        sync(device)
        start = time.perf_counter()
        losses.append(step(i))
        if not math.isfinite(losses[-1]):
            # JSON has no NaN, and a ladder rung that diverged has no throughput worth comparing.
            raise FloatingPointError(f"loss {losses[-1]} at step {i + 1}")
        sync(device)
        elapsed = (time.perf_counter() - start) * 1000.0
        if i >= args.warmup:
            step_ms.append(elapsed)
        print(
            f"ladder_torch: {rung} step {i + 1}/{args.warmup + args.steps}"
            f" loss {losses[-1]:.6f} {elapsed:.1f} ms",
            file=sys.stderr,
            flush=True,
        )
    ops = profile_step(lambda: step(args.warmup + args.steps), device) if args.op_times else None
    median = statistics.median(step_ms)
    config = describe(cfg, rung, args.loss_vocab)
    rewritten = dynamo_counters["inductor"]["fuse_attention"]
    if rewritten and not flash:
        # Inductor's pattern matcher may turn the materialised attention into SDPA: say so.
        config += f" (inductor rewrote {rewritten} attentions to SDPA)"
    return {
        "rung": rung,
        "ok": True,
        "torch": torch.__version__,
        "device": device_name(device),
        "config": config,
        "step_ms": step_ms,
        "median_ms": median,
        "tokens_per_sec": args.b * args.t / (median / 1000.0),
        "losses": losses,
        "ops": ops,
    }


def profile_step(step, device: torch.device) -> dict:
    """One more step under torch.profiler: on CUDA the kernels that took its device time, on the
    CPU the operators that took its host time (self times), slowest first; or why not."""
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        with profile(activities=activities) as prof:
            step()
            sync(device)
        rows = []
        for event in prof.key_averages():
            if cuda and event.device_type == DeviceType.CPU:
                continue  # an operator: its kernels' time is theirs (no double counting)
            us = event.self_device_time_total if cuda else event.self_cpu_time_total
            if us > 0:
                rows.append({"op": event.key, "calls": event.count, "ms": us / 1000.0})
    except Exception as err:  # noqa: BLE001 (a profiler that cannot run here)
        return {"error": one_line(err)}
    rows.sort(key=lambda row: -row["ms"])
    total = sum(row["ms"] for row in rows)
    return {"clock": "cuda" if cuda else "cpu", "total_ms": total, "ops": rows[:PROFILE_ROWS]}


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def one_line(err: BaseException) -> str:
    lines = [s.strip() for s in str(err).splitlines() if s.strip()]
    text = f"{type(err).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text[:300]


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", required=True, help="llm.c model checkpoint (v3 or v5)")
    parser.add_argument("--data", required=True, help="llm.c token shard")
    parser.add_argument("--b", type=int, required=True, help="batch size")
    parser.add_argument("--t", type=int, required=True, help="sequence length")
    parser.add_argument("--warmup", type=int, required=True, help="untimed steps per rung")
    parser.add_argument("--steps", type=int, required=True, help="timed steps per rung")
    parser.add_argument("--rungs", required=True, help=f"comma-separated, of {','.join(RUNGS)}")
    parser.add_argument("--lr", type=float, default=6e-4)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.95)
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--grad-clip", type=float, default=1.0, help="0: no clipping")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument(
        "--op-times",
        action="store_true",
        help="after each rung's timed steps, one more under torch.profiler: its slowest kernels "
        "(CUDA) or operators (CPU) in the rung's 'ops'",
    )
    parser.add_argument(
        "--loss-vocab",
        choices=["padded", "real"],
        default="padded",
        help="the logits the loss covers on the padded rungs: every row of wte (nanoGPT's) or "
        "the first V (llm.c's)",
    )
    args = parser.parse_args()

    rungs = [r.strip() for r in args.rungs.split(",") if r.strip()]
    unknown = [r for r in rungs if r not in RUNGS]
    if unknown or not rungs:
        parser.error(
            f"--rungs: unknown rung {', '.join(map(repr, unknown))} (known: {', '.join(RUNGS)})"
            if unknown
            else "--rungs: no rung named"
        )
    args.rung_list = rungs
    for name in ("b", "t", "steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must not be negative, not {args.warmup}")
    if args.grad_clip < 0:
        parser.error(f"--grad-clip must not be negative, not {args.grad_clip}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no CUDA device here (use --device cpu)")
    return parser, args


def main() -> None:
    parser, args = parse_args()
    device = torch.device(args.device)
    try:
        cfg, tensors = load_checkpoint(args.checkpoint)
        tokens = load_tokens(args.data)
        B, T = args.b, args.t
        if T > cfg["maxT"]:
            raise BadInput(
                f"--t {T} exceeds the checkpoint's maximum sequence length {cfg['maxT']}"
            )
        windows = (tokens.numel() - 1) // (B * T)
        if windows < 1:
            raise BadInput(
                f"{args.data}: {tokens.numel()} tokens, fewer than the B*T+1 = {B * T + 1} "
                "one batch needs"
            )
        if tokens.numel() and int(tokens.max()) >= cfg["V"]:
            raise BadInput(
                f"{args.data}: token {int(tokens.max())} is outside the checkpoint's vocabulary "
                f"of {cfg['V']}"
            )
    except BadInput as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")

    batches = []
    for w in range(min(windows, args.warmup + args.steps)):
        chunk = tokens[w * B * T : (w + 1) * B * T + 1]
        batches.append((chunk[:-1].view(B, T).to(device), chunk[1:].view(B, T).to(device)))
    print(
        f"ladder_torch: torch {torch.__version__} on {device_name(device)}; "
        f"L={cfg['L']} NH={cfg['NH']} C={cfg['C']} V={cfg['V']} Vp={cfg['Vp']} "
        f"(checkpoint version {cfg['version']}); B={B} T={T}; {windows} windows",
        file=sys.stderr,
        flush=True,
    )

    for rung in args.rung_list:
        try:
            result = run_rung(rung, cfg, tensors, batches, args, device)
        except Exception as err:  # noqa: BLE001 (compile unavailable, out of memory, ...)
            print(f"ladder_torch: {rung} failed: {err!r}", file=sys.stderr, flush=True)
            result = {"rung": rung, "ok": False, "error": one_line(err)}
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        torch._dynamo.reset()
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
