#!/usr/bin/env bash
# The GPU bundle's runner (written by `cargo xtask gpu-bundle`; docs/GPU.md).
#
#   run.sh [STAGE...] [--out DIR] [--archive FILE.tar.gz] [--budget SECONDS]
#
# Stages, run in this order (all of them when none is named):
#   info      nvidia-smi and the driver's device attributes (gpu-bench info)
#   tests     every `gpu::` kernel test at full size, then sim_vs_gpu (simulator vs
#             hardware); or the binaries named in $TESTS, in that order, e.g.
#             TESTS="gemm sim_vs_gpu flash"; $TESTS_FIRST (e.g. "gemm sim_vs_gpu") runs the
#             binaries it names before the others
#   sanitize  compute-sanitizer memcheck, racecheck, synccheck and initcheck over the kernel
#             tests, at their small sizes (KERNEL_TESTS_SMALL=1: the tools are slow), tool by
#             tool; or the tools named in $SANITIZE_TOOLS (e.g. "memcheck"), over the binaries
#             named in $TESTS; first a probe (memcheck over gpu-bench info) that ends the stage
#             where the sanitizer cannot run
#   bench     every benchmark `gpu-bench list` names, each writing its markdown report, then
#             `trainer bench` of GPT-2 124M in fp32, tf32, bf16 and fp16 ($BENCH_PRECISIONS,
#             e.g. "bf16,fp16"; $BENCH_MODELS, e.g. "d12 d24", adds sizes), writing
#             bench/trainer-<gpu>.md (or the benchmarks in $BENCHMARKS, e.g.
#             BENCHMARKS="kernels attention trainer")
#   train     first 3 steps of GPT-2 124M (B=4, T=128) on the CPU backend and on the GPU in
#             fp32, losses compared; then in each precision ($TRAIN_PRECISIONS, default
#             "fp32 tf32 bf16 fp16"): a resumed 124M run against an uninterrupted one (bit for
#             bit), and 124M trained on the bundled Shakespeare for $TRAIN_STEPS steps (default
#             200), B=16, T=1024; metrics in DIR/train/<precision>.jsonl
#   ladder    the speed ladder against PyTorch (`trainer ladder`), writing
#             bench/ladder-<gpu>.md and its chart; $LADDER_RUNGS (e.g. "fp32,tf32") runs a part
#   profile   Nsight Compute (ncu --set detailed, warp states, scheduler) on single launches,
#             the report of each in its log: the kernels of one bf16 GPT-2 124M training step
#             (trainer bench, B=16, T=1024) named by $PROFILE_STEP, a list of REGEX@COUNT
#             (one ncu run each: the first COUNT launches whose kernel name matches REGEX);
#             then, for each problem in $PROFILE_GEMMS (names of `gpu-bench gemm`, separated
#             by commas), the variant $PROFILE_VARIANT (default "BF16 wgmma": the tile the
#             trainer's choice picks) launched once
#
# $GEMM_ENGINE (auto, mma-sync or wgmma; default auto) is passed to every `trainer` run of the
# bench, train and ladder stages as --gemm-engine: mma-sync takes the Hopper wgmma GEMMs and
# flash attention's wgmma kernels out of the trainer (to measure it without them, or to go on
# when they fail on hardware); wgmma forces them on every GEMM, so tf32 runs and
# unpadded-vocabulary rungs fail by design. Likewise
# $WGMMA_TILE (auto, 128, 256, pingpong or deferred; default auto) as --wgmma-tile: 128 keeps
# the Hopper GEMMs but not their 128 x 256 tiles; pingpong and deferred measure the trainer on
# the ping-pong or the deferred-epilogue kernels. $WEIGHT_GRADS (auto or stream-k; default
# auto) as --weight-grads: stream-k runs the weight gradients on the stream-K kernels, with
# whatever $WGMMA_TILE gives the other GEMMs.
# And $CLASSIFIER (auto, staged or two-reads; default auto) as --classifier: two-reads takes
# the classifier that stages each row of logits in shared memory out of the trainer (to
# measure what staging brings, or to go on when it fails on hardware).
#
# Each step runs under its own time limit (seconds; override with e.g. TIMEOUT_BENCH=900):
# TIMEOUT_INFO, TIMEOUT_TESTS (per test binary), TIMEOUT_SANITIZE (per tool and binary),
# TIMEOUT_BENCH (per benchmark), TIMEOUT_TRAIN (per precision), TIMEOUT_LADDER,
# TIMEOUT_PROFILE (per ncu run). Logs go to
# DIR/logs (a log over 2 MiB keeps its first and last MiB), reports to DIR/bench, and
# DIR/summary.md gets one row per step.
#
# --archive packs DIR into a .tar.gz (for a machine that can only hand back a few files) and
# copies summary.md beside it as FILE.summary.md. Both are refreshed before and after every
# step, atomically, so a run killed from outside still leaves the results of every step that
# finished, and its summary names the step that was running.
# --budget (or $RUN_BUDGET) is the whole run's wall-clock limit in seconds, counted from the
# start: each step's limit shrinks to what is left (less 20 s for the step's kill grace and
# the last archive), and steps that find no time left are listed as not run. Give it about a
# minute less than the limit that will kill the run from outside.
#
# Exit status: 0 when every step passed, 1 when one failed, 2 when there is no GPU here or the
# arguments are wrong, 3 when nothing failed but the budget stopped or skipped a step.
set -uo pipefail

case $0 in
    */*) here=${0%/*} ;;
    *) here=. ;;
esac
here=$(cd "$here" && pwd)
all_stages=(info tests sanitize bench train ladder profile)
out=./gpu-results
archive=""
budget=${RUN_BUDGET:-}
stages=()

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

while (($#)); do
    case "$1" in
        --out) out=${2:?--out needs a folder}; shift 2 ;;
        --archive) archive=${2:?--archive needs a file name}; shift 2 ;;
        --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        info|tests|sanitize|bench|train|ladder|profile) stages+=("$1"); shift ;;
        *) echo "run.sh: unknown argument '$1' (stages: ${all_stages[*]}; see --help)" >&2; exit 2 ;;
    esac
done
((${#stages[@]})) || stages=("${all_stages[@]}")
if [[ -n $budget && ! $budget =~ ^[0-9]+$ ]]; then
    echo "run.sh: --budget wants whole seconds, not '$budget'" >&2
    exit 2
fi
# Stages change directory; the archive's path must not.
[[ -z $archive || $archive == /* ]] || archive=$PWD/$archive

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
for packed in "$here"/bin/*.xz "$here"/tests/*.xz "$here"/cubin/*.xz "$here"/ptx/*.xz; do
    [[ -e $packed ]] || continue
    dir=$work/$(basename "$(dirname "$packed")")
    file=$dir/$(basename "$packed" .xz)
    mkdir -p "$dir"
    unxz_to "$packed" "$file" || { echo "run.sh: could not unpack $packed" >&2; exit 2; }
    [[ $file == *.cubin || $file == *.ptx ]] || chmod +x "$file"
done
bench_bin=$work/bin/gpu-bench
# Built on another machine: a loader error (a glibc too old for them) would fail every step.
if ! "$bench_bin" --help >/dev/null 2>"$work/exec-check.log"; then
    echo "run.sh: the bundle's executables do not run on this machine: $(head -n 1 "$work/exec-check.log") (the bundle's MANIFEST.txt names the glibc they need)" >&2
    exit 2
fi
for variable in TESTS TESTS_FIRST; do
    for name in ${!variable:-}; do
        if [[ ! -x $work/tests/$name ]]; then
            echo "run.sh: $variable names '$name', which is not a test binary of this bundle (it has: $(ls "$work/tests" | tr '\n' ' '))" >&2
            exit 2
        fi
    done
done
# cudarc, built against CUDA 12.8, opens libcublas.so / libcublasLt.so or their .so.12 (.11, …):
# a CUDA 13 machine has libcublas.so.13, under the unversioned name only where the toolkit's
# development files are installed on the loader's path. Where cudarc's names do not load, link
# the newest versioned libraries found ($CUBLAS_LIB_DIRS, PyTorch's wheels, the loader's cache,
# the toolkit) under those names and their own in a folder of the bundle's, and put only that
# folder on LD_LIBRARY_PATH: the PyTorch processes the ladder and the attention benchmark start
# inherit it, and PyTorch's wheels come first so that both sides load the same cuBLAS (a
# toolkit folder on the path would hand PyTorch the toolkit's other libraries too).
can_load() { python3 -c 'import ctypes, sys; [ctypes.CDLL(n) for n in sys.argv[1:]]' "$@" 2>/dev/null; }
cublas_dirs() {
    echo ${CUBLAS_LIB_DIRS:-}
    python3 -c 'import glob, nvidia; print(" ".join(d for p in nvidia.__path__ for d in glob.glob(p + "/*/lib")))' 2>/dev/null
    ldconfig -p 2>/dev/null | sed -n 's/.*libcublas\.so\.[0-9]* .*=> \(.*\)\/[^/]*$/\1/p'
    echo /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib
}
link_cublas() {
    local lib_dir blas blas_lt
    can_load libcublas.so libcublasLt.so && return
    can_load libcublas.so.12 libcublasLt.so.12 && return
    for lib_dir in $(cublas_dirs); do
        blas=$(ls "$lib_dir"/libcublas.so.[0-9]* 2>/dev/null | sort -V | tail -n 1)
        blas_lt=$(ls "$lib_dir"/libcublasLt.so.[0-9]* 2>/dev/null | sort -V | tail -n 1)
        if [[ -n $blas && -n $blas_lt ]]; then
            mkdir -p "$work/lib"
            ln -sf "$blas" "$work/lib/libcublas.so"
            ln -sf "$blas_lt" "$work/lib/libcublasLt.so"
            # libcublas needs libcublasLt by its versioned name: beside the links, not by
            # putting $lib_dir on the path.
            ln -sf "$blas" "$work/lib/${blas##*/}"
            ln -sf "$blas_lt" "$work/lib/${blas_lt##*/}"
            export LD_LIBRARY_PATH=$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
            echo "run.sh: cuBLAS for cudarc: $blas"
            return
        fi
    done
}
link_cublas
export GPU_BUNDLE_COMMIT=$(sed -n 's/^commit: //p' "$here/MANIFEST.txt")
export GPU_BENCH_SCRIPTS=$here/bench
export RUST_LIB_BACKTRACE=${RUST_LIB_BACKTRACE:-0} # errors in one line; panics keep RUST_BACKTRACE
# Every test, benchmark and trainer process loads the same module: from the cubin ptxas made of
# it when the bundle was built (gpu-bench info says which), else from the PTX, which the driver
# JIT-compiles once (tens of seconds for sm_90a) and then takes from its compute cache: make
# sure the cache is large enough to keep it.
export GPU_HOST_CUBIN_DIR=${GPU_HOST_CUBIN_DIR-$work/cubin}
# The executables carry the digest of their PTX, not its text: they read it from here (the
# simulator's side of sim_vs_gpu, and the JIT when there is no cubin).
export GPU_HOST_PTX_DIR=$work/ptx
export CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-4294967296}

failed=0     # a step failed
incomplete=0 # the budget stopped or skipped a step
rows=()
running=""   # the summary row of the step in flight, while one is
started=$(date -u '+%Y-%m-%d %H:%M UTC')
gpu=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -n 1)

# Seconds a timed-out step gets between SIGTERM and SIGKILL, and seconds of a budget kept for
# the last summary and archive.
kill_grace=10
budget_reserve=10
# A log longer than this (a sanitizer reporting every hazard, say) keeps only its first and
# last half of it, so that the archive stays within what a call can hand back (16 MiB a file).
log_limit=$((2 << 20))

trim_log() {
    local size
    size=$(wc -c <"$1")
    ((size > log_limit)) || return 0
    {
        head -c $((log_limit / 2)) "$1"
        printf '\n[... run.sh cut %d bytes from the middle of this log ...]\n' $((size - log_limit))
        tail -c $((log_limit / 2)) "$1"
    } >"$1.trimmed" && mv -f "$1.trimmed" "$1"
}

write_summary() {
    {
        echo "# GPU bundle run"
        echo
        echo "- GPU: $gpu (name, driver, compute capability)"
        echo "- Started: $started; stages: ${stages[*]}${budget:+; budget ${budget} s}"
        echo "- Bundle: $(tr '\n' ' ' <"$here/MANIFEST.txt" | sed 's/files:.*//')"
        echo "- Sanitizer runs use the tests' small sizes (KERNEL_TESTS_SMALL=1); logs are in logs/."
        echo
        echo "| stage | step | result | seconds | headline |"
        echo "|---|---|---|---:|---|"
        ((${#rows[@]} == 0)) || printf '%s\n' "${rows[@]}"
        [[ -z $running ]] || echo "$running"
    } >"$out/summary.md.partial" && mv -f "$out/summary.md.partial" "$out/summary.md"
}

# Writes the summary and, with --archive, packs DIR (into a temporary file renamed over the
# archive, so a kill mid-way leaves the previous archive whole) with the summary beside it.
publish() {
    write_summary || return 1
    [[ -n $archive ]] || return 0
    local stem=${archive%.tar.gz}
    stem=${stem%.tgz}
    tar -czf "$archive.partial" -C "$(dirname "$out")" "$(basename "$out")" &&
        mv -f "$archive.partial" "$archive" &&
        cp "$out/summary.md" "$stem.summary.md.partial" &&
        mv -f "$stem.summary.md.partial" "$stem.summary.md"
}

record() {
    rows+=("$1")
    publish || echo "run.sh: could not write the summary or the archive" >&2
}

# step STAGE NAME TIMEOUT LOG HEADLINE_FN COMMAND...: runs COMMAND with its output in LOG under
# a time limit (cut to what is left of the budget), then records a summary row whose headline
# HEADLINE_FN extracts from LOG.
step() {
    local stage=$1 name=${2//|/\\|} limit=$3 log=$4 headline_fn=$5
    shift 5
    local start=$SECONDS status result headline cut=""
    if [[ -n $budget ]]; then
        local left=$((budget - SECONDS - kill_grace - budget_reserve))
        if ((left < 5)); then
            echo "== $stage: $name: not run (the budget of ${budget} s is spent)"
            incomplete=1
            record "| $stage | $name | not run (budget spent) | 0 | |"
            return
        fi
        ((limit <= left)) || { limit=$left; cut=1; }
    fi
    running="| $stage | $name | running when the run was stopped | | logs/$(basename "$log") |"
    publish || echo "run.sh: could not write the summary or the archive" >&2
    echo "== $stage: $name (limit ${limit}s)"
    timeout --kill-after=$kill_grace "$limit" "$@" >"$log" 2>&1
    status=$?
    running=""
    headline=$("$headline_fn" "$log" "$status")
    trim_log "$log"
    # A step that says nothing useful is summarised by its error, else its last line.
    [[ -n ${headline//[[:space:]]/} ]] || headline=$(grep -m1 '^Error: ' "$log" | cut -c1-200)
    [[ -n ${headline//[[:space:]]/} ]] || headline=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-200)
    case $status in
        0) result=pass ;;
        124|137) result="FAIL (timed out after ${limit}s)"
            [[ -z $cut ]] || result="stopped by the budget after ${limit}s" ;;
        *) result="FAIL (exit $status)" ;;
    esac
    if [[ $result == pass ]] && grep -q 'skipped: no GPU' "$log"; then
        result="FAIL (tests skipped: the GPU was not usable)"
    fi
    case $result in
        pass) ;;
        stopped*) incomplete=1 ;;
        *) failed=1 ;;
    esac
    echo "   $result, $((SECONDS - start)) s: $headline"
    record "| $stage | $name | $result | $((SECONDS - start)) | ${headline//|/\\|} |"
}

# Headline extractors: (log, exit status) -> one line.
headline_line() { sed -n 's/^headline: //p' "$1" | tail -n 1; }
# Test counts from the harness's `test result:` lines; for a binary stopped before it printed
# one, from its `test NAME ... ok|FAILED` lines.
headline_tests() {
    awk '/^test result:/ { done = 1; for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
         /^test .* \.\.\. ok$/ { so_far_p++ }
         /^test .* \.\.\. FAILED$/ { so_far_f++ }
         END { if (done) printf "%d passed, %d failed", p, f; else printf "%d passed, %d failed before it stopped", so_far_p, so_far_f }' "$1"
    grep -m1 -o 'kernel tests on .*' "$1" | sed 's/^/; /'
}
headline_sim_vs_gpu() {
    awk '/largest relative difference/ { v = $NF + 0; r = (v > r ? v : r) }
         /largest difference [0-9.e+-]+ of/ { for (i = 1; i < NF; i++) if ($i == "difference") { v = $(i+1) + 0; w = (v > w ? v : w) } }
         END { printf "largest mma/wgmma difference %.3g of sum|a*b|+|c|, largest .approx relative difference %.3g", w, r }' "$1"
    headline_tests "$1" | sed 's/^/; /'
}
# The tool's summary line: memcheck, synccheck and initcheck print `ERROR SUMMARY: N errors`,
# racecheck `RACECHECK SUMMARY: N hazards displayed (N errors, N warnings)`.
sanitizer_summary() {
    grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?, [0-9]+ warnings?\)' "$1"
}
headline_probe() {
    sanitizer_summary "$1" || grep -m1 '^=========' "$1" | cut -c1-200
}
headline_sanitizer() {
    local summary
    summary=$(sanitizer_summary "$1")
    echo "${summary:-no sanitizer summary line}; $(headline_tests "$1" | tr -d '\n')"
}

# The test binaries, in the order they run: those named in $TESTS, in its order, else those
# named in $TESTS_FIRST, then every other kernel test binary, then sim_vs_gpu (names are
# checked when run.sh starts).
test_bins() {
    local bin name
    if [[ -n ${TESTS:-} ]]; then
        for name in $TESTS; do echo "$work/tests/$name"; done
        return
    fi
    for name in ${TESTS_FIRST:-}; do echo "$work/tests/$name"; done
    for bin in "$work"/tests/*; do
        name=$(basename "$bin")
        [[ $name == sim_vs_gpu || " ${TESTS_FIRST:-} " == *" $name "* ]] || echo "$bin"
    done
    [[ ! -x $work/tests/sim_vs_gpu || " ${TESTS_FIRST:-} " == *" sim_vs_gpu "* ]] ||
        echo "$work/tests/sim_vs_gpu"
}

stage_info() {
    nvidia-smi >"$out/logs/nvidia-smi.txt" 2>&1
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu \
        --format=csv >>"$out/logs/nvidia-smi.txt" 2>&1
    step info "gpu-bench info" "${TIMEOUT_INFO:-120}" "$out/logs/info.log" headline_line "$bench_bin" info
    {
        echo; echo "machine:"
        sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null
        ldd --version 2>&1 | head -n 1
        echo "kernel $(uname -r)"
        echo; echo "bundle:"; cat "$here/MANIFEST.txt"
    } >>"$out/logs/info.log"
}

# A kernel fault (an illegal address or instruction, a launch failure, or a kernel that
# compute-sanitizer stopped) poisons the CUDA context for the rest of its process, so every
# later test of the binary fails too: the first GPU run lost sim_vs_gpu's Hopper and zoo
# comparisons, and 18 GEMM tests under memcheck, that way.
poisoned() {
    grep -qE 'CUDA_ERROR_(ILLEGAL_ADDRESS|ILLEGAL_INSTRUCTION|LAUNCH_FAILED|MISALIGNED_ADDRESS|INVALID_PC|HARDWARE_STACK_ERROR|LAUNCH_TIMEOUT)|unspecified launch failure' "$1"
}
# The names in libtest's closing `failures:` list of LOG.
failed_tests() {
    awk '/^failures:$/ { n = 0; listing = 1; next }
         listing && /^    [^ ]/ { names[++n] = $1; next }
         listing && /^$/ && n > 0 { listing = 0 }
         END { for (i = 1; i <= n; i++) print names[i] }' "$1"
}
# isolate STAGE LABEL LOG HEADLINE_FN COMMAND...: after the step that wrote LOG failed with a
# poisoned context, reruns each failed test alone (COMMAND NAME --exact, in a process of its
# own, at most $ISOLATE_MAX of them), one summary row each: which failures are the fault's own.
isolate() {
    local stage=$1 label=$2 log=$3 headline_fn=$4 test count=0
    shift 4
    [[ ${rows[-1]} == *"| FAIL"* ]] && poisoned "$log" || return 0
    for test in $(failed_tests "$log"); do
        if ((count++ >= ${ISOLATE_MAX:-24})); then
            echo "== $stage: $label: more failed tests than ISOLATE_MAX=${ISOLATE_MAX:-24}; the rest not rerun alone"
            break
        fi
        step "$stage" "$label alone: $test" "${TIMEOUT_ISOLATED:-120}" "${log%.log}-alone-${test//::/-}.log" \
            "$headline_fn" "$@" "$test" --exact
        [[ ${rows[-1]} != *"not run (budget spent)"* ]] || break
    done
}

stage_tests() {
    local bin name
    for bin in $(test_bins); do
        name=$(basename "$bin")
        if [[ $name == sim_vs_gpu ]]; then
            step tests sim_vs_gpu "${TIMEOUT_TESTS:-300}" "$out/logs/tests-sim_vs_gpu.log" \
                headline_sim_vs_gpu "$bin" --nocapture --test-threads=1
            isolate tests sim_vs_gpu "$out/logs/tests-sim_vs_gpu.log" headline_sim_vs_gpu \
                "$bin" --nocapture --test-threads=1
        else
            step tests "$name gpu::" "${TIMEOUT_TESTS:-300}" "$out/logs/tests-$name.log" \
                headline_tests "$bin" gpu::
            isolate tests "$name" "$out/logs/tests-$name.log" headline_tests "$bin"
        fi
    done
}

stage_sanitize() {
    local sanitizer tool bin
    sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    if [[ -z $sanitizer ]]; then
        failed=1
        record "| sanitize | compute-sanitizer | FAIL (not found on PATH or in /usr/local/cuda/bin) | 0 | |"
        return
    fi
    # compute-sanitizer does not run on every machine (it refused an H200 under gVisor with
    # "Device not supported"): one short run first, and the stage ends there if it fails, with
    # one row saying why instead of one failure per tool and binary. SANITIZE_PROBE=off skips it.
    if [[ ${SANITIZE_PROBE:-on} != off ]]; then
        step sanitize "probe: memcheck gpu-bench info" "${TIMEOUT_INFO:-120}" \
            "$out/logs/sanitize-probe.log" headline_probe \
            "$sanitizer" --tool memcheck --error-exitcode 99 "$bench_bin" info
        if [[ ${rows[-1]} != *"| pass |"* ]]; then
            echo "== sanitize: compute-sanitizer could not run gpu-bench info here (logs/sanitize-probe.log); the stage ends"
            return
        fi
    fi
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
        for bin in $(test_bins); do
            [[ $(basename "$bin") != sim_vs_gpu ]] || continue
            KERNEL_TESTS_SMALL=1 step sanitize "$tool $(basename "$bin")" "${TIMEOUT_SANITIZE:-300}" \
                "$out/logs/sanitize-$tool-$(basename "$bin").log" headline_sanitizer \
                "$sanitizer" --tool "$tool" --error-exitcode 99 "$bin" gpu:: --test-threads=1
            KERNEL_TESTS_SMALL=1 isolate sanitize "$tool $(basename "$bin")" \
                "$out/logs/sanitize-$tool-$(basename "$bin").log" headline_sanitizer \
                "$sanitizer" --tool "$tool" --error-exitcode 99 "$bin" --test-threads=1
        done
    done
}

stage_bench() {
    local name
    for name in ${BENCHMARKS:-$("$bench_bin" list) trainer}; do
        # From $out, each benchmark writes its report to bench/<name>-<gpu>.md, the path the
        # report has in the repository.
        pushd "$out" >/dev/null || exit 2
        if [[ $name == trainer ]]; then
            # Full GPT-2 124M training steps (B=16, T=1024) in each precision, each with the
            # backend's fastest defaults for it (flash attention for bf16/fp16), then one more
            # step with every op timed (CUDA events); the report, rewritten after each
            # precision, is bench/trainer-<gpu>.md.
            step bench "trainer ${BENCH_PRECISIONS:-fp32,tf32,bf16,fp16}" "${TIMEOUT_BENCH:-540}" \
                "$out/logs/bench-trainer.log" headline_line \
                "$work/bin/trainer" bench --device cuda --precision "${BENCH_PRECISIONS:-fp32,tf32,bf16,fp16}" \
                --gemm-engine "${GEMM_ENGINE:-auto}" \
                --wgmma-tile "${WGMMA_TILE:-auto}" --weight-grads "${WEIGHT_GRADS:-auto}" --classifier "${CLASSIFIER:-auto}" \
                --model ${BENCH_MODELS:-d12} --batch-size 16 --seq-len 1024 --warmup 3 --steps 10 \
                --op-times --report
        elif [[ $name == attention ]]; then
            # $ATTENTION_SEQ_LENS (e.g. 1024) narrows the sequence lengths (default
            # 1024,2048,4096; T = 4096 takes the longest).
            step bench "$name" "${TIMEOUT_BENCH:-540}" "$out/logs/bench-$name.log" headline_line \
                "$bench_bin" "$name" --seq-lens "${ATTENTION_SEQ_LENS:-1024,2048,4096}"
        else
            step bench "$name" "${TIMEOUT_BENCH:-540}" "$out/logs/bench-$name.log" headline_line \
                "$bench_bin" "$name"
        fi
        popd >/dev/null || exit 2
    done
}

headline_train() {
    sed -n 's/^done: //p' "$1" | tail -n 1
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

# GPT-2 124M for 4 steps (B=4, T=128) with a checkpoint after step 2, then again from a copy of
# that checkpoint: the metrics (timings aside) and the final model and optimizer state must be
# identical, bit for bit (resume is bit-exact on the same device, docs/TRAINER.md). The
# checkpoints (1.5 GB each) stay out of the results folder.
resume_bit_exact() {
    local precision=$1 ckpt=$work/resume-$1 metrics=$out/train/resume-$1
    local args=(train --device cuda --precision "$precision" --batch-size 4 --seq-len 128
        --steps 4 --val-every 0 --data-dir "$data_dir"
        --gemm-engine "${GEMM_ENGINE:-auto}" --wgmma-tile "${WGMMA_TILE:-auto}" --weight-grads "${WEIGHT_GRADS:-auto}"
        --classifier "${CLASSIFIER:-auto}")
    rm -rf "$ckpt" "$metrics" && mkdir -p "$ckpt/full" "$ckpt/resumed" "$metrics" || return 1
    "$work/bin/trainer" "${args[@]}" --model d12 --checkpoint-dir "$ckpt/full" \
        --checkpoint-every 2 --metrics-jsonl "$metrics/full.jsonl" || return 1
    cp "$ckpt/full/model_00000002.bin" "$ckpt/full/state_00000002.bin" "$ckpt/resumed/" &&
        head -n 2 "$metrics/full.jsonl" >"$metrics/resumed.jsonl" || return 1
    "$work/bin/trainer" "${args[@]}" --resume "$ckpt/resumed" \
        --metrics-jsonl "$metrics/resumed.jsonl" || return 1
    local file same=yes
    for file in model_00000004.bin state_00000004.bin; do
        cmp -s "$ckpt/full/$file" "$ckpt/resumed/$file" || { same=no; echo "$file differs"; }
    done
    rm -rf "$ckpt"
    python3 - "$metrics/full.jsonl" "$metrics/resumed.jsonl" "$same" <<'PY'
import json, sys
def records(path):
    return [{k: v for k, v in json.loads(l).items() if k not in ("step_ms", "tokens_per_sec", "mfu")}
            for l in open(path)]
full, resumed, same = records(sys.argv[1]), records(sys.argv[2]), sys.argv[3] == "yes"
ok = same and len(full) == 4 and full == resumed
losses = [r["train_loss"] for r in full]
print(f"headline: {'bit-exact' if ok else 'NOT bit-exact'}: losses {losses}, final model and "
      f"optimizer state {'identical' if same else 'different'}")
sys.exit(0 if ok else 1)
PY
}

stage_train() {
    local precision
    mkdir -p "$out/train"
    # `timeout` runs programs, not functions: the checks run in a child bash.
    export -f cpu_vs_cuda resume_bit_exact
    export work out data_dir
    step train "first steps, CPU vs GPU fp32" "${TIMEOUT_TRAIN:-420}" "$out/logs/train-cpu-vs-cuda.log" \
        headline_line bash -c cpu_vs_cuda
    for precision in ${TRAIN_PRECISIONS:-fp32 tf32 bf16 fp16}; do
        step train "resume bit-exact $precision" "${TIMEOUT_TRAIN:-420}" \
            "$out/logs/train-resume-$precision.log" headline_line \
            bash -c 'resume_bit_exact "$0"' "$precision"
        step train "trainer train $precision" "${TIMEOUT_TRAIN:-420}" \
            "$out/logs/train-$precision.log" headline_train \
            "$work/bin/trainer" train --device cuda --precision "$precision" --model d12 \
            --gemm-engine "${GEMM_ENGINE:-auto}" \
            --wgmma-tile "${WGMMA_TILE:-auto}" --weight-grads "${WEIGHT_GRADS:-auto}" --classifier "${CLASSIFIER:-auto}" \
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
        --wgmma-tile "${WGMMA_TILE:-auto}" --weight-grads "${WEIGHT_GRADS:-auto}" --classifier "${CLASSIFIER:-auto}" \
        --op-times --torch-script "$here/bench/ladder_torch.py" ${LADDER_RUNGS:+--rungs "$LADDER_RUNGS"}
    popd >/dev/null || exit 2
}

# The kernels profiled by default: where a bf16 step's time went on an H200 (2026-11-26), and
# the GEMM shapes furthest from cuBLAS (the fc projection's dX with the GELU backward and
# column sums the trainer fuses into it; `--only` matches by substring, so `qkv fwd` also
# profiles `qkv fwd + bias`, the ping-pong kernel's bias epilogue beside its plain one). The
# forward kernels first appear in the first layer; the backward ones after the classifier, in
# the last layer's backward.
default_profile_step='^(flash_attention_forward(_wgmma)?|residual_layernorm_forward)_bf16$@2 ^(fused_classifier(_staged)?_bf16|layernorm_backward(_cached)?(_colsum)?_bf16|layernorm_backward_reduce|flash_attention_backward_(dq|dkdv)(_wgmma)?_bf16)$@7 ^gemm_wgmma@4'
default_profile_gemms='qkv fwd,fcproj dX + dGELU,fc dW,attention PV'

# One report per profiled kernel (the details page: speed of light, workloads, warp states,
# scheduler statistics, occupancy, launch statistics) -> one line: each kernel's duration,
# throughputs, and the cycles between a warp's issued instructions.
headline_ncu() {
    awk 'function flush() {
             if (name != "") printf "%s: %s, SM %s%%, memory %s%%, %s cycles a warp issue\n", name, d, sm, mem, cpi
         }
         /^  [A-Za-z_][A-Za-z0-9_]* \(/ { flush(); name = $1; d = sm = mem = cpi = "?"; n++ }
         /^ +Duration / { d = $NF " " $(NF-1) }
         /^ +Compute \(SM\) Throughput / { sm = $NF }
         /^ +Memory Throughput +%/ { mem = $NF }
         /^ +Warp Cycles Per Issued Instruction / { cpi = $NF }
         END { flush(); if (n == 0 && status == 0) print "no kernel matched" }' status="$2" "$1" |
        head -n 8 | paste -sd ';' | sed 's/;/; /g'
}

# ncu's options for the first COUNT launches matching REGEX: always these 14 words (the
# rehearsal's stand-in for ncu skips them). The detailed set lacks the warp states (what the
# warps stall on) and the scheduler statistics (issue slots), which a latency-bound kernel needs.
# ncu locks the clocks to base for its replays, so its durations are for comparing kernels, not
# for reporting speeds.
ncu_options() {
    local regex=$1 count=$2
    ncu_args=(--set detailed --section WarpStateStats --section SchedulerStats --import-source no
        --target-processes all --kernel-name "regex:$regex" --launch-count "$count")
}

stage_profile() {
    local ncu item items regex count problem problems
    ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
    if [[ -z $ncu ]]; then
        failed=1
        record "| profile | ncu | FAIL (not found on PATH or in /usr/local/cuda/bin) | 0 | |"
        return
    fi
    read -ra items <<<"${PROFILE_STEP:-$default_profile_step}"
    for item in "${items[@]}"; do
        regex=${item%@*} count=${item##*@}
        [[ $item == *@* ]] || count=1
        ncu_options "$regex" "$count"
        step profile "ncu step: $regex x$count" "${TIMEOUT_PROFILE:-180}" \
            "$out/logs/profile-step-$(printf %s "$regex" | tr -c 'A-Za-z0-9_' '_' | cut -c1-60).log" \
            headline_ncu "$ncu" "${ncu_args[@]}" \
            "$work/bin/trainer" bench --device cuda --precision bf16 --model d12 \
            --batch-size 16 --seq-len 1024 --warmup 0 --steps 1 \
            --gemm-engine "${GEMM_ENGINE:-auto}" --wgmma-tile "${WGMMA_TILE:-auto}" --weight-grads "${WEIGHT_GRADS:-auto}" \
            --classifier "${CLASSIFIER:-auto}"
    done
    IFS=, read -ra problems <<<"${PROFILE_GEMMS:-$default_profile_gemms}"
    ncu_options '^gemm_' 4
    for problem in "${problems[@]}"; do
        step profile "ncu gemm: $problem" "${TIMEOUT_PROFILE:-180}" \
            "$out/logs/profile-gemm-${problem// /_}.log" headline_ncu "$ncu" "${ncu_args[@]}" \
            "$bench_bin" gemm --only "$problem" --variant "${PROFILE_VARIANT:-BF16 wgmma}" --once
    done
}

for stage in "${all_stages[@]}"; do
    [[ " ${stages[*]} " == *" $stage "* ]] && "stage_$stage"
done

publish || failed=1
echo
cat "$out/summary.md"
((failed == 0)) || exit 1
((incomplete == 0)) || exit 3
exit 0
