#!/usr/bin/env bash
# The GPU bundle's runner (written by `cargo xtask gpu-bundle`; docs/GPU.md).
#
#   run.sh [STAGE...] [--out DIR] [--archive FILE]
#
# Stages, run in this order (all of them when none is named):
#   info      nvidia-smi and the driver's device attributes (gpu-bench info)
#   tests     every `gpu::` kernel test at full size (or the binaries in $TESTS, e.g.
#             TESTS="gemm flash"), then sim_vs_gpu (simulator vs hardware)
#   sanitize  compute-sanitizer memcheck, racecheck, synccheck and initcheck over the kernel
#             tests, at their small sizes (KERNEL_TESTS_SMALL=1: the tools are slow)
#   bench     every benchmark `gpu-bench list` names, each writing its markdown report, then
#             `trainer bench` of GPT-2 124M in fp32, tf32, bf16 and fp16 (or those in
#             $BENCHMARKS, e.g. BENCHMARKS="kernels attention trainer")
#   train     first 3 steps of GPT-2 124M (B=4, T=128) on the CPU backend and on the GPU in
#             fp32, losses compared; then 124M trained on the bundled Shakespeare in each
#             precision ($TRAIN_PRECISIONS, default "fp32 tf32 bf16 fp16") for $TRAIN_STEPS
#             steps (default 200), B=16, T=1024; metrics in DIR/train/<precision>.jsonl
#   ladder    the speed ladder against PyTorch (`trainer ladder`), writing
#             bench/ladder-<gpu>.md and its chart; $LADDER_RUNGS (e.g. "fp32,tf32") runs a part
#
# $GEMM_ENGINE (auto, mma-sync or wgmma; default auto) is passed to every `trainer` run of the
# bench, train and ladder stages as --gemm-engine: mma-sync takes the Hopper wgmma GEMMs out of
# the trainer (to measure it without them, or to go on when they fail on hardware). Likewise
# $WGMMA_TILE (auto, 128, 256 or pingpong; default auto) as --wgmma-tile: 128 keeps the Hopper
# GEMMs but not their 128 x 256 tiles; pingpong measures the trainer on the ping-pong kernels.
#
# Each step runs under its own time limit (seconds; override with e.g. TIMEOUT_BENCH=900):
# TIMEOUT_INFO, TIMEOUT_TESTS (per test binary), TIMEOUT_SANITIZE (per tool and binary),
# TIMEOUT_BENCH (per benchmark), TIMEOUT_TRAIN (per precision), TIMEOUT_LADDER. Logs go to
# DIR/logs, reports to DIR/bench, and DIR/summary.md gets one row per step. --archive packs
# DIR into a .tar.gz (for a machine that can only hand back a few files). Exit status: 0 when
# every step passed, 1 when one failed, 2 when there is no GPU here or the arguments are wrong.
set -uo pipefail

case $0 in
    */*) here=${0%/*} ;;
    *) here=. ;;
esac
here=$(cd "$here" && pwd)
all_stages=(info tests sanitize bench train ladder)
out=./gpu-results
archive=""
stages=()

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

while (($#)); do
    case "$1" in
        --out) out=${2:?--out needs a folder}; shift 2 ;;
        --archive) archive=${2:?--archive needs a file name}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        info|tests|sanitize|bench|train|ladder) stages+=("$1"); shift ;;
        *) echo "run.sh: unknown argument '$1' (stages: ${all_stages[*]}; see --help)" >&2; exit 2 ;;
    esac
done
((${#stages[@]})) || stages=("${all_stages[@]}")

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "run.sh: no NVIDIA GPU here (nvidia-smi is not installed); nothing was run" >&2
    exit 2
fi
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "run.sh: no NVIDIA GPU here (nvidia-smi -L lists none); nothing was run" >&2
    exit 2
fi

mkdir -p "$out/logs" "$out/bench" || exit 2
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bundle.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

# The binaries travel xz-compressed; python3's lzma unpacks them where `xz` is missing.
unxz_to() {
    if command -v xz >/dev/null 2>&1; then
        xz -dc "$1" >"$2"
    else
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
    fi
}
for packed in "$here"/bin/*.xz "$here"/tests/*.xz; do
    [[ -e $packed ]] || continue
    dir=$work/$(basename "$(dirname "$packed")")
    exe=$dir/$(basename "$packed" .xz)
    mkdir -p "$dir"
    unxz_to "$packed" "$exe" && chmod +x "$exe" || { echo "run.sh: could not unpack $packed" >&2; exit 2; }
done
bench_bin=$work/bin/gpu-bench
export GPU_BUNDLE_COMMIT=$(sed -n 's/^commit: //p' "$here/MANIFEST.txt")
export GPU_BENCH_SCRIPTS=$here/bench
export RUST_LIB_BACKTRACE=${RUST_LIB_BACKTRACE:-0} # errors in one line; panics keep RUST_BACKTRACE

failed=0
rows=()

# step STAGE NAME TIMEOUT LOG HEADLINE_FN COMMAND...: runs COMMAND with its output in LOG under
# a time limit, then records a summary row whose headline HEADLINE_FN extracts from LOG.
step() {
    local stage=$1 name=$2 limit=$3 log=$4 headline_fn=$5
    shift 5
    local start=$SECONDS status result headline
    echo "== $stage: $name (limit ${limit}s)"
    timeout --kill-after=15 "$limit" "$@" >"$log" 2>&1
    status=$?
    headline=$("$headline_fn" "$log" "$status")
    # A step that says nothing useful is summarised by its error, else its last line.
    [[ -n ${headline//[[:space:]]/} ]] || headline=$(grep -m1 '^Error: ' "$log" | cut -c1-200)
    [[ -n ${headline//[[:space:]]/} ]] || headline=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-200)
    case $status in
        0) result=pass ;;
        124|137) result="FAIL (timed out after ${limit}s)" ;;
        *) result="FAIL (exit $status)" ;;
    esac
    if [[ $result == pass ]] && grep -q 'skipped: no GPU' "$log"; then
        result="FAIL (tests skipped: the GPU was not usable)"
    fi
    [[ $result == pass ]] || failed=1
    echo "   $result, $((SECONDS - start)) s: $headline"
    rows+=("| $stage | $name | $result | $((SECONDS - start)) | ${headline//|/\\|} |")
}

# Headline extractors: (log, exit status) -> one line.
headline_line() { sed -n 's/^headline: //p' "$1" | tail -n 1; }
headline_tests() {
    awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
         END { printf "%d passed, %d failed", p, f }' "$1"
    grep -m1 -o 'kernel tests on .*' "$1" | sed 's/^/; /'
}
headline_sim_vs_gpu() {
    awk '/largest difference [0-9]+ ulp/ { for (i = 1; i <= NF; i++) if ($i == "ulp") u = ($(i-1) > u ? $(i-1) : u) }
         /largest relative difference/ { v = $NF + 0; r = (v > r ? v : r) }
         END { printf "largest mma/kernel difference %d ulp, largest .approx relative difference %.3g", u, r }' "$1"
    headline_tests "$1" | sed 's/^/; /'
}
headline_sanitizer() {
    local summary
    summary=$(grep -m1 -o 'ERROR SUMMARY: [0-9]* error[s]*' "$1")
    echo "${summary:-no ERROR SUMMARY line}; $(headline_tests "$1" | tr -d '\n')"
}

# The kernel test binaries: all of them, or those named in $TESTS (e.g. TESTS="gemm flash").
kernel_test_bins() {
    local bin name
    for bin in "$work"/tests/*; do
        name=$(basename "$bin")
        [[ $name != sim_vs_gpu ]] || continue
        [[ -z ${TESTS:-} || " $TESTS " == *" $name "* ]] && echo "$bin"
    done
}

stage_info() {
    nvidia-smi >"$out/logs/nvidia-smi.txt" 2>&1
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu \
        --format=csv >>"$out/logs/nvidia-smi.txt" 2>&1
    step info "gpu-bench info" "${TIMEOUT_INFO:-120}" "$out/logs/info.log" headline_line "$bench_bin" info
    { echo; echo "bundle:"; cat "$here/MANIFEST.txt"; } >>"$out/logs/info.log"
}

stage_tests() {
    local bin
    for bin in $(kernel_test_bins); do
        step tests "$(basename "$bin") gpu::" "${TIMEOUT_TESTS:-420}" "$out/logs/tests-$(basename "$bin").log" \
            headline_tests "$bin" gpu::
    done
    if [[ -x $work/tests/sim_vs_gpu ]]; then
        step tests sim_vs_gpu "${TIMEOUT_TESTS:-420}" "$out/logs/tests-sim_vs_gpu.log" \
            headline_sim_vs_gpu "$work/tests/sim_vs_gpu" --nocapture --test-threads=1
    fi
}

stage_sanitize() {
    local sanitizer tool bin
    sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    if [[ -z $sanitizer ]]; then
        rows+=("| sanitize | compute-sanitizer | FAIL (not found on PATH or in /usr/local/cuda/bin) | 0 | |")
        failed=1
        return
    fi
    for tool in memcheck racecheck synccheck initcheck; do
        for bin in $(kernel_test_bins); do
            KERNEL_TESTS_SMALL=1 step sanitize "$tool $(basename "$bin")" "${TIMEOUT_SANITIZE:-300}" \
                "$out/logs/sanitize-$tool-$(basename "$bin").log" headline_sanitizer \
                "$sanitizer" --tool "$tool" --error-exitcode 99 "$bin" gpu:: --test-threads=1
        done
    done
}

headline_none() { :; }

stage_bench() {
    local name precision
    for name in ${BENCHMARKS:-$("$bench_bin" list) trainer}; do
        if [[ $name == trainer ]]; then
            # Full GPT-2 124M training steps (B=16, T=1024) in every precision, each with the
            # backend's fastest defaults for it (flash attention for bf16/fp16).
            for precision in fp32 tf32 bf16 fp16; do
                step bench "trainer $precision" "${TIMEOUT_BENCH:-540}" \
                    "$out/logs/bench-trainer-$precision.log" headline_none \
                    "$work/bin/trainer" bench --device cuda --precision "$precision" \
                    --gemm-engine "${GEMM_ENGINE:-auto}" \
                    --wgmma-tile "${WGMMA_TILE:-auto}" \
                    --model d12 --batch-size 16 --seq-len 1024 --warmup 3 --steps 10
            done
            continue
        fi
        # From $out, each benchmark writes its report to bench/<name>-<gpu>.md, the path the
        # report has in the repository.
        pushd "$out" >/dev/null || exit 2
        step bench "$name" "${TIMEOUT_BENCH:-540}" "$out/logs/bench-$name.log" headline_line \
            "$bench_bin" "$name"
        popd >/dev/null || exit 2
    done
}

headline_train() {
    sed -n 's/^done: /final /p' "$1" | tail -n 1
}

# The bundled Shakespeare shards (the GPU machine has no network to prepare them).
data_dir=$here/data/shakespeare

# The same fresh 124M model (same seed, same batches) for 3 steps on the CPU backend and on the
# GPU in fp32: the losses must agree to 2e-3.
cpu_vs_cuda() {
    local device
    for device in cpu cuda; do
        "$work/bin/trainer" train --device "$device" --precision fp32 --attention naive \
            --model d12 --batch-size 4 --seq-len 128 --steps 3 --val-every 0 --no-shuffle \
            --data-dir "$data_dir" --metrics-jsonl "$out/train/first-steps-$device.jsonl" || return 1
    done
    python3 - "$out/train/first-steps-cpu.jsonl" "$out/train/first-steps-cuda.jsonl" <<'PY'
import json, sys
cpu, gpu = ([json.loads(l)["train_loss"] for l in open(p)] for p in sys.argv[1:])
diff = max(abs(a - b) for a, b in zip(cpu, gpu))
print(f"headline: CPU {cpu} vs GPU {gpu}: max |diff| {diff:.2e} (tolerance 2e-3)")
sys.exit(0 if len(cpu) == len(gpu) == 3 and diff <= 2e-3 else 1)
PY
}

stage_train() {
    local precision
    mkdir -p "$out/train"
    # `timeout` runs programs, not functions: the comparison runs in a child bash.
    export -f cpu_vs_cuda
    export work out data_dir
    step train "first steps, CPU vs GPU fp32" "${TIMEOUT_TRAIN:-420}" "$out/logs/train-cpu-vs-cuda.log" \
        headline_line bash -c cpu_vs_cuda
    for precision in ${TRAIN_PRECISIONS:-fp32 tf32 bf16 fp16}; do
        step train "trainer train $precision" "${TIMEOUT_TRAIN:-420}" \
            "$out/logs/train-$precision.log" headline_train \
            "$work/bin/trainer" train --device cuda --precision "$precision" --model d12 \
            --gemm-engine "${GEMM_ENGINE:-auto}" \
            --wgmma-tile "${WGMMA_TILE:-auto}" \
            --batch-size 16 --seq-len 1024 --steps "${TRAIN_STEPS:-200}" --lr 6e-4 \
            --warmup-steps 20 --val-every 50 --val-batches 5 --data-dir "$data_dir" \
            --metrics-jsonl "$out/train/$precision.jsonl"
    done
}

headline_ladder() {
    sed -n 's/^report: //p' "$1" | tail -n 1
}

stage_ladder() {
    # From $out, the report lands in bench/ladder-<gpu>.md, its path in the repository.
    pushd "$out" >/dev/null || exit 2
    step ladder "trainer ladder${LADDER_RUNGS:+ $LADDER_RUNGS}" "${TIMEOUT_LADDER:-570}" \
        "$out/logs/ladder.log" headline_ladder \
        "$work/bin/trainer" ladder --device cuda --data "$data_dir/train_000000.bin" \
        --gemm-engine "${GEMM_ENGINE:-auto}" \
        --wgmma-tile "${WGMMA_TILE:-auto}" \
        --torch-script "$here/bench/ladder_torch.py" ${LADDER_RUNGS:+--rungs "$LADDER_RUNGS"}
    popd >/dev/null || exit 2
}

started=$(date -u '+%Y-%m-%d %H:%M UTC')
for stage in "${all_stages[@]}"; do
    [[ " ${stages[*]} " == *" $stage "* ]] && "stage_$stage"
done

{
    echo "# GPU bundle run"
    echo
    echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -n 1) (name, driver, compute capability)"
    echo "- Started: $started; stages: ${stages[*]}"
    echo "- Bundle: $(tr '\n' ' ' <"$here/MANIFEST.txt" | sed 's/files:.*//')"
    echo "- Sanitizer runs use the tests' small sizes (KERNEL_TESTS_SMALL=1); logs are in logs/."
    echo
    echo "| stage | step | result | seconds | headline |"
    echo "|---|---|---|---:|---|"
    printf '%s\n' "${rows[@]}"
} >"$out/summary.md"

if [[ -n $archive ]]; then
    tar -czf "$archive" -C "$(dirname "$out")" "$(basename "$out")" || failed=1
fi
echo
cat "$out/summary.md"
exit "$failed"
