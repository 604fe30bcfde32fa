//! `run.sh` on a machine without a GPU, and against a fake one: shell scripts standing in for
//! the bundle's binaries and an `nvidia-smi` that lists one GPU. What these pin is the runner's
//! bookkeeping (summary rows, exit status, the budget, the archive a kill leaves behind), which
//! a GPU session depends on and cannot afford to debug on device time.

use super::RUN_SH;
use crate::cmd::write_executable_atomic;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// On a machine without `nvidia-smi`, run.sh exits 2 with one line on stderr and nothing on
/// stdout, before touching anything.
#[test]
fn run_sh_without_a_gpu_exits_2_with_one_line() {
    let scratch = Scratch::new("no-gpu");
    let script = scratch.0.join("run.sh");
    write_executable_atomic(&script, RUN_SH.as_bytes()).unwrap();
    let empty_path = scratch.0.join("no-bin");
    fs::create_dir_all(&empty_path).unwrap();
    let bash = ["/bin/bash", "/usr/bin/bash"].into_iter().find(|p| Path::new(p).exists());
    let out = Command::new(bash.expect("bash"))
        .arg(&script)
        .arg("--out")
        .arg(scratch.0.join("results"))
        .env("PATH", &empty_path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("run.sh: no NVIDIA GPU here"), "{stderr}");
}

/// Unknown stages and a budget that is not whole seconds are refused with exit 2 (before the
/// GPU check).
#[test]
fn run_sh_rejects_unknown_stages_and_bad_budgets() {
    let run = |args: &[&str]| {
        Command::new("bash").arg("-c").arg(RUN_SH).arg("run.sh").args(args).output().unwrap()
    };
    let out = run(&["tset"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown argument 'tset'"));
    let out = run(&["tests", "--budget", "9m"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--budget wants whole seconds, not '9m'")
    );
}

/// A log over 2 MiB keeps its first and last MiB (the archive must stay small enough to come
/// back), and its headline is read before the cut.
#[test]
fn run_sh_trims_long_logs() {
    let fake = FakeBundle::new("chatty");
    let out = fake.run(&["tests", "--out", "r"], &[("TESTS", "chatty")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = fake.read("r/summary.md");
    assert!(summary.contains("| tests | chatty gpu:: | pass |"), "{summary}");
    assert!(summary.contains("| 1 passed, 0 failed |"), "{summary}");
    let log = fs::read(fake.path("r/logs/tests-chatty.log")).unwrap();
    assert!(log.len() < (2 << 20) + 200, "{} bytes", log.len());
    let log = String::from_utf8_lossy(&log);
    let printed = 4_999_980 + "\ntest result: ok. 1 passed; 0 failed; 0 ignored\n".len();
    let cut =
        format!("[... run.sh cut {} bytes from the middle of this log ...]", printed - (2 << 20));
    assert!(log.contains(&cut), "no line {cut}");
    assert!(log.starts_with("a hazard reported at length\n"));
    assert!(log.ends_with("test result: ok. 1 passed; 0 failed; 0 ignored\n"));
}

/// A failing test binary fails its row and the run (exit 1); the others still run and pass.
#[test]
fn run_sh_reports_a_failing_test_binary_and_goes_on() {
    let fake = FakeBundle::new("failing");
    let out = fake.run(&["tests", "--out", "r"], &[("TESTS", "bad gemm sim_vs_gpu")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let summary = fake.read("r/summary.md");
    assert!(summary.contains("| tests | bad gpu:: | FAIL (exit 101) |"), "{summary}");
    assert!(summary.contains("1 passed, 1 failed"), "{summary}");
    assert!(summary.contains("| tests | gemm gpu:: | pass |"), "{summary}");
    assert!(summary.contains("2 passed, 0 failed; kernel tests on Fake GPU"), "{summary}");
    let sim_vs_gpu = "largest mma/wgmma difference 1.5e-07 of sum\\|a*b\\|+\\|c\\|, largest \
                      .approx relative difference 1.25e-07; 3 passed, 0 failed";
    assert!(has_row(&summary, &["tests", "sim_vs_gpu", "pass"], &[sim_vs_gpu]), "{summary}");
}

/// The bench stage runs every benchmark `gpu-bench list` names, then the trainer in four
/// precisions with its report, all from the results folder so the reports land in its
/// `bench/`; `$BENCH_PRECISIONS`, `$BENCH_MODELS` and the engine variables reach the trainer.
#[test]
fn run_sh_bench_runs_every_benchmark_and_the_trainer() {
    let fake = FakeBundle::new("bench");
    let engine = [("GEMM_ENGINE", "mma-sync"), ("CLASSIFIER", "two-reads")];
    let out = fake.run(&["bench", "--out", "r"], &engine);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = fake.read("r/summary.md");
    assert!(has_row(&summary, &["bench", "gemm", "pass"], &["gemm ok"]), "{summary}");
    let trainer = "bench --device cuda --precision fp32,tf32,bf16,fp16 --gemm-engine mma-sync \
                   --wgmma-tile auto --weight-grads auto --classifier two-reads --model d12 \
                   --batch-size 16 --seq-len 1024 --warmup 3 --steps 10 --op-times --report";
    let step = ["bench", "trainer fp32,tf32,bf16,fp16", "pass"];
    assert!(has_row(&summary, &step, &[trainer]), "{summary}");
    assert_eq!(fake.read("r/bench/gemm-fake.md"), "# GEMM\n");
    assert_eq!(fake.read("r/bench/trainer-fake.md"), "# trainer\n");
    let variables =
        [("BENCHMARKS", "trainer"), ("BENCH_PRECISIONS", "bf16"), ("BENCH_MODELS", "d12 d24")];
    let out = fake.run(&["bench", "--out", "s"], &variables);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = fake.read("s/summary.md");
    assert!(summary.contains("| bench | trainer bf16 | pass |"), "{summary}");
    assert!(summary.contains("--model d12 d24 --batch-size 16"), "{summary}");
    assert!(!summary.contains("| bench | gemm |"), "{summary}");
}

/// The ladder stage runs the trainer's ladder on the GPU from the results folder, with op
/// times, the bundled data and PyTorch script, and the rungs of `$LADDER_RUNGS`.
#[test]
fn run_sh_ladder_runs_the_named_rungs_with_op_times() {
    let fake = FakeBundle::new("ladder");
    let out = fake.run(&["ladder", "--out", "r"], &[("LADDER_RUNGS", "fp32,tf32")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = fake.read("r/summary.md");
    assert!(summary.contains("| ladder | trainer ladder fp32,tf32 | pass |"), "{summary}");
    let args = fake.read("r/logs/ladder.log");
    let wanted = [
        "ladder --device cuda --data ",
        "/bundle/data/shakespeare/train_000000.bin ",
        "--op-times --torch-script ",
        "/bundle/bench/ladder_torch.py --rungs fp32,tf32",
    ];
    for arg in wanted {
        assert!(args.contains(arg), "{arg}: {args}");
    }
}

/// The profile stage runs ncu once per `$PROFILE_STEP` item over one bf16 training step, then
/// once per `$PROFILE_GEMMS` problem over `gpu-bench gemm --once`, each kernel's duration,
/// throughputs and cycles between a warp's issues in the headline; without ncu it fails in one
/// row.
#[test]
fn run_sh_profiles_a_training_step_and_gemms_with_ncu() {
    let fake = FakeBundle::new("profile");
    let env =
        [("PROFILE_STEP", "^gemm_wgmma@4 ^flash_(fwd|bwd)"), ("PROFILE_GEMMS", "qkv fwd,fc dW")];
    let out = fake.run(&["profile", "--out", "r"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = fake.read("r/summary.md");
    let kernel =
        "gemm_wgmma_bf16_rc_bf16: 12.50 us, SM 80.10%, memory 40.20%, 7.30 cycles a warp issue";
    for step in ["ncu step: ^gemm_wgmma x4", "ncu step: ^flash_(fwd\\|bwd) x1", "ncu gemm: fc dW"] {
        assert!(has_row(&summary, &["profile", step, "pass"], &[kernel]), "{step}: {summary}");
    }
    let log = fake.read("r/logs/profile-step-_gemm_wgmma.log");
    assert!(log.contains("==PROF== kernels regex:^gemm_wgmma, at most 4"), "{log}");
    let trainer = "bench --device cuda --precision bf16 --model d12 --batch-size 16 --seq-len 1024 \
                   --warmup 0 --steps 1 --gemm-engine auto --wgmma-tile auto --weight-grads auto \
                   --classifier auto";
    assert!(log.contains(trainer), "{log}");
    let log = fake.read("r/logs/profile-gemm-fc_dW.log");
    assert!(log.contains("==PROF== kernels regex:^gemm_, at most 4"), "{log}");
    let system_ncu = Command::new("sh")
        .args(["-c", "command -v ncu || ls /usr/local/cuda/bin/ncu"])
        .output()
        .is_ok_and(|o| o.status.success());
    if system_ncu {
        return; // the case without ncu cannot be staged on this machine
    }
    fs::remove_file(fake.path("fakebin/ncu")).unwrap();
    let out = fake.run(&["profile", "--out", "s"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let summary = fake.read("s/summary.md");
    assert!(summary.contains("| profile | ncu | FAIL (not found"), "{summary}");
}

/// `$TESTS` says which test binaries run and in what order, `$TESTS_FIRST` which run before
/// the others; a name the bundle lacks stops run.sh before anything runs (exit 2, naming it).
#[test]
fn run_sh_runs_the_tests_named_in_their_order() {
    let fake = FakeBundle::new("order");
    let out = fake.run(&["tests", "--out", "r"], &[("TESTS", "sim_vs_gpu gemm")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = fake.read("r/summary.md");
    let sim_vs_gpu = summary.find("| tests | sim_vs_gpu | pass |");
    let gemm = summary.find("| tests | gemm gpu:: | pass |");
    assert!(sim_vs_gpu.is_some_and(|s| gemm.is_some_and(|g| s < g)), "{summary}");
    assert_eq!(summary.matches("| tests |").count(), 2, "{summary}");
    let out = fake.run(&["tests", "--out", "s"], &[("TESTS", "gemm gemmm")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("TESTS names 'gemmm', which is not a test binary"),
        "{}",
        text(&out)
    );
    assert!(!fake.path("s/summary.md").exists());
    let variables = [("TESTS_FIRST", "sim_vs_gpu gemm"), ("TIMEOUT_TESTS", "2")];
    let out = fake.run(&["tests", "--out", "f"], &variables);
    let summary = fake.read("f/summary.md");
    let order: Vec<&str> = summary
        .lines()
        .filter_map(|l| l.strip_prefix("| tests | "))
        .filter_map(|l| l.split(" | ").next())
        .collect();
    let want = ["sim_vs_gpu", "gemm gpu::", "bad gpu::", "chatty gpu::", "slow gpu::"];
    assert_eq!(order, want, "{}", text(&out));
    let out = fake.run(&["tests", "--out", "g"], &[("TESTS_FIRST", "gem")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("TESTS_FIRST names 'gem'"), "{}", text(&out));
}

/// Executables the machine's loader refuses (built against a newer glibc) stop run.sh at once
/// with exit 2 and the loader's line, instead of failing every step.
#[test]
fn run_sh_stops_when_the_executables_do_not_run_here() {
    let fake = FakeBundle::new("loader");
    fake.packed(
        "bin/gpu-bench",
        "echo \"gpu-bench: /lib/x86_64-linux-gnu/libc.so.6: version \\`GLIBC_2.99' not found\" >&2; exit 1",
    );
    let out = fake.run(&["info", "tests", "--out", "r"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("run.sh: the bundle's executables do not run on this machine"));
    assert!(stderr.contains("version `GLIBC_2.99' not found"), "{stderr}");
    assert!(!fake.path("r/summary.md").exists());
}

/// Where cuBLAS exists only under a versioned name cudarc does not try (`libcublas.so.13`),
/// run.sh links it under `libcublas.so` (and its own name) in a folder it puts on
/// `LD_LIBRARY_PATH`, the library's folder staying off it, so the GEMM baselines load.
/// Two copies of this process's libc stand in for the two libraries.
#[test]
fn run_sh_links_a_cublas_cudarc_does_not_name() {
    let maps = fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .split_whitespace()
        .find(|field| field.starts_with('/') && field.ends_with("/libc.so.6"))
        .expect("this process maps libc");
    let fake = FakeBundle::new("cublas");
    let libs = fake.path("cuda13/lib");
    fs::create_dir_all(&libs).unwrap();
    for name in ["libcublas.so.13", "libcublasLt.so.13"] {
        fs::copy(libc, libs.join(name)).unwrap();
    }
    fake.packed(
        "bin/gpu-bench",
        "case $1 in info) python3 -c 'import ctypes; ctypes.CDLL(\"libcublas.so\"); \
         ctypes.CDLL(\"libcublasLt.so\")' \
         && echo \"headline: cuBLAS loads; path $LD_LIBRARY_PATH links: $(ls ${LD_LIBRARY_PATH%%:*} | tr '\\n' ' ')\" ;; esac",
    );
    let dirs = format!("/nonexistent {}", libs.display());
    let out = fake.run(&["info", "--out", "r"], &[("CUBLAS_LIB_DIRS", &dirs)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let want = format!("run.sh: cuBLAS for cudarc: {}/libcublas.so.13", libs.display());
    assert!(text(&out).contains(&want), "{}", text(&out));
    let summary = fake.read("r/summary.md");
    let links = "links: libcublas.so libcublas.so.13 libcublasLt.so libcublasLt.so.13 ";
    assert!(summary.contains(links), "{summary}");
    assert!(!summary.contains(&libs.display().to_string()), "the library folder is on the path");
    assert!(fake.read("r/summary.md").contains("cuBLAS loads"), "{}", fake.read("r/summary.md"));
}

/// A binary whose failures follow a kernel fault (which poisons the CUDA context for the rest of
/// its process) has each failed test rerun alone, a row each: the fault's own test fails again,
/// the one it took down passes. A failure without a fault is not rerun.
#[test]
fn run_sh_reruns_the_tests_a_kernel_fault_took_down_alone() {
    let fake = FakeBundle::new("isolate");
    fake.packed(
        "tests/faulty",
        "case \" $* \" in \
         *' gpu::culprit '*) echo 'DriverError(CUDA_ERROR_ILLEGAL_ADDRESS, \"an illegal memory access\")'; \
           echo 'test result: FAILED. 0 passed; 1 failed; 0 ignored'; exit 101 ;; \
         *' gpu::victim '*) echo 'test result: ok. 1 passed; 0 failed; 0 ignored' ;; \
         *) printf 'test gpu::a ... ok\\ntest gpu::culprit ... FAILED\\ntest gpu::victim ... FAILED\\n\\n'; \
           printf 'failures:\\n\\n---- gpu::culprit stdout ----\\n    an indented line\\n'; \
           echo 'DriverError(CUDA_ERROR_ILLEGAL_ADDRESS, \"an illegal memory access\")'; \
           printf '\\nfailures:\\n    gpu::culprit\\n    gpu::victim\\n\\n'; \
           echo 'test result: FAILED. 1 passed; 2 failed; 0 ignored'; exit 101 ;; \
         esac",
    );
    let out = fake.run(&["tests", "--out", "r"], &[("TESTS", "faulty bad")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let summary = fake.read("r/summary.md");
    assert!(summary.contains("| tests | faulty gpu:: | FAIL (exit 101) |"), "{summary}");
    assert!(
        summary.contains("| tests | faulty alone: gpu::culprit | FAIL (exit 101) |"),
        "{summary}"
    );
    assert!(summary.contains("| tests | faulty alone: gpu::victim | pass |"), "{summary}");
    assert_eq!(summary.matches(" alone: ").count(), 2, "{summary}");
    assert!(summary.contains("| tests | bad gpu:: | FAIL (exit 101) |"), "{summary}");
    let log = fake.read("r/logs/tests-faulty-alone-gpu-victim.log");
    assert!(log.contains("1 passed"), "{log}");

    // The same under a sanitizer, which reruns them with the same tool.
    fake.script("fakebin/compute-sanitizer", "shift 4; exec \"$@\"");
    let variables =
        [("TESTS", "faulty"), ("SANITIZE_TOOLS", "memcheck"), ("SANITIZE_PROBE", "off")];
    let out = fake.run(&["sanitize", "--out", "s"], &variables);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let summary = fake.read("s/summary.md");
    let alone = "| sanitize | memcheck faulty alone: gpu::victim | pass |";
    assert!(summary.contains(alone), "{summary}");
    assert_eq!(summary.matches(" alone: ").count(), 2, "{summary}");
}

/// The sanitizer stage runs the tools named in `$SANITIZE_TOOLS` over the binaries named in
/// `$TESTS`, at the tests' small sizes, and headlines each tool's summary line (racecheck's is
/// its own); every process finds the unpacked cubins and PTX (not made executable) through
/// `GPU_HOST_CUBIN_DIR` and `GPU_HOST_PTX_DIR`.
#[test]
fn run_sh_sanitizes_the_named_tools_and_points_at_the_cubins_and_ptx() {
    let fake = FakeBundle::new("sanitize");
    fake.script(
        "fakebin/compute-sanitizer",
        "tool=$2; shift 4; \"$@\"; status=$?; if [ \"$tool\" = racecheck ]; then \
         echo '========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)'; \
         else echo '========= ERROR SUMMARY: 0 errors'; fi; exit $status",
    );
    fake.packed("cubin/kernels-sm_90a-0123456789abcdef.cubin", "not a real cubin");
    fake.packed("ptx/kernels-sm_90a-0123456789abcdef.ptx", "not a real PTX");
    fake.packed(
        "tests/cubins",
        "echo \"kernel tests on Fake GPU, small sizes: $KERNEL_TESTS_SMALL\"; \
         ls -l \"$GPU_HOST_CUBIN_DIR\" \"$GPU_HOST_PTX_DIR\"; \
         echo 'test result: ok. 1 passed; 0 failed; 0 ignored'",
    );
    let variables = [("TESTS", "cubins"), ("SANITIZE_TOOLS", "memcheck racecheck")];
    let out = fake.run(&["sanitize", "--out", "r"], &variables);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = fake.read("r/summary.md");
    let probe = ["sanitize", "probe: memcheck gpu-bench info", "pass"];
    assert!(has_row(&summary, &probe, &["ERROR SUMMARY: 0 errors"]), "{summary}");
    assert!(summary.contains("| sanitize | memcheck cubins | pass |"), "{summary}");
    assert!(summary.contains("ERROR SUMMARY: 0 errors; 1 passed, 0 failed"), "{summary}");
    let racecheck = "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings); 1 passed";
    assert!(summary.contains("| sanitize | racecheck cubins | pass |"), "{summary}");
    assert!(summary.contains(racecheck), "{summary}");
    assert_eq!(summary.matches("| sanitize |").count(), 3, "{summary}");
    let log = fake.read("r/logs/sanitize-memcheck-cubins.log");
    assert!(log.contains("small sizes: 1"), "{log}");
    for file in ["kernels-sm_90a-0123456789abcdef.cubin", "kernels-sm_90a-0123456789abcdef.ptx"] {
        let listing = log.lines().find(|l| l.ends_with(file));
        assert!(listing.is_some_and(|l| l.starts_with("-rw-")), "{file}: {log}");
    }
}

/// Where compute-sanitizer cannot run (it refused an H200 under gVisor), the probe fails and
/// the stage ends there: one failed row saying why, not one per tool and binary.
#[test]
fn run_sh_ends_the_sanitizer_stage_when_its_probe_fails() {
    let fake = FakeBundle::new("sanitize-probe");
    fake.script(
        "fakebin/compute-sanitizer",
        "echo '========= Error: Device not supported.'; exit 1",
    );
    let out = fake.run(&["sanitize", "--out", "r"], &[("TESTS", "gemm")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let summary = fake.read("r/summary.md");
    let probe = ["sanitize", "probe: memcheck gpu-bench info", "FAIL (exit 1)"];
    assert!(has_row(&summary, &probe, &["========= Error: Device not supported."]), "{summary}");
    assert_eq!(summary.matches("| sanitize |").count(), 1, "{summary}");
}

/// With `--budget`, a step that would outlast the budget is stopped when it is spent, the
/// steps after it are listed as not run, the run ends inside the budget with exit 3, and the
/// archive and the summary beside it hold every row.
#[test]
fn run_sh_keeps_to_its_budget() {
    let fake = FakeBundle::new("budget");
    let started = Instant::now();
    let args = ["info", "tests", "bench", "--budget", "30", "--out", "r", "--archive", "r.tar.gz"];
    let out = fake.run(&args, &[("TESTS", "gemm slow"), ("BENCHMARKS", "trainer")]);
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(seconds < 30.0, "the run took {seconds:.1} s, over its budget of 30 s");
    let summary = fake.read("r/summary.md");
    assert!(summary.contains("budget 30 s"), "{summary}");
    assert!(summary.contains("| info | gpu-bench info | pass |"), "{summary}");
    assert!(summary.contains("| tests | gemm gpu:: | pass |"), "{summary}");
    assert!(summary.contains("| tests | slow gpu:: | stopped by the budget after"), "{summary}");
    assert!(summary.contains("1 passed, 0 failed before it stopped"), "{summary}");
    assert!(
        summary.contains("| bench | trainer fp32,tf32,bf16,fp16 | not run (budget spent) |"),
        "{summary}"
    );
    assert!(!summary.contains("running when the run was stopped"), "{summary}");
    assert!(!summary.contains("sim_vs_gpu"), "$TESTS did not name it: {summary}");
    assert_eq!(fake.read("r.summary.md"), summary);
    let listing = fake.archive_listing("r.tar.gz");
    for file in
        ["r/summary.md", "r/logs/info.log", "r/logs/tests-gemm.log", "r/logs/tests-slow.log"]
    {
        assert!(listing.lines().any(|l| l == file), "{file} missing from the archive:\n{listing}");
    }
}

/// A run killed from outside (as the device tool kills a call at its limit) leaves a whole
/// archive with every finished step, and a summary that names the step it was running.
#[test]
fn run_sh_killed_mid_step_leaves_its_results() {
    use std::os::unix::process::CommandExt;
    let fake = FakeBundle::new("killed");
    let mut run =
        fake.command(&["tests", "--out", "r", "--archive", "r.tar.gz"], &[("TESTS", "gemm slow")]);
    let mut child =
        run.process_group(0).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let in_flight = "| tests | slow gpu:: | running when the run was stopped |";
    let deadline = Instant::now() + Duration::from_secs(30);
    while !fs::read_to_string(fake.path("r.summary.md")).is_ok_and(|s| s.contains(in_flight)) {
        assert!(Instant::now() < deadline, "run.sh never reported the slow step as running");
        sleep(Duration::from_millis(50));
    }
    let kill = format!("kill -KILL -- -{}", child.id());
    let killed = Command::new("bash").args(["-c", &kill]).status().unwrap();
    assert!(killed.success());
    child.wait().unwrap();
    let summary = fake.read("r.summary.md");
    assert!(summary.contains("| tests | gemm gpu:: | pass |"), "{summary}");
    assert!(summary.contains(in_flight), "{summary}");
    let listing = fake.archive_listing("r.tar.gz");
    assert!(listing.lines().any(|l| l == "r/logs/tests-gemm.log"), "{listing}");
}

/// A folder under the system's temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("run-sh-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A bundle whose binaries are shell scripts, beside a `fakebin/nvidia-smi` listing one GPU.
///
/// Test binaries: `gemm` passes 2 tests, `bad` fails 1 of 2 (unless `$FIXED` is set), `chatty` prints 5 MB
/// before passing, `slow` passes 1 test, then sleeps
/// for ten minutes; `sim_vs_gpu` prints its largest differences as the real one does.
/// `gpu-bench` answers `info` and runs one benchmark, `gemm`; `trainer` prints its arguments as
/// its headline. Both write their reports under `bench/` of the folder they run in. `ncu` checks
/// the options run.sh always gives it, prints one kernel's report and runs the command.
pub(crate) struct FakeBundle {
    scratch: Scratch,
}

impl FakeBundle {
    pub(crate) fn new(test: &str) -> Self {
        let fake = FakeBundle { scratch: Scratch::new(test) };
        fake.script(
            "fakebin/nvidia-smi",
            "case $1 in -L) echo 'GPU 0: Fake GPU (UUID: GPU-0)' ;; *) echo 'Fake GPU, 0.0, 9.0' ;; esac",
        );
        fake.script(
            "fakebin/ncu",
            "[ \"$1 $2 $3 $4 $5 $6 $7 $8 $9 ${10} ${11} ${13}\" = '--set detailed --section WarpStateStats \
             --section SchedulerStats --import-source no --target-processes all --kernel-name \
             --launch-count' ] || { echo \"fake ncu: unexpected options: $*\"; exit 9; }
             echo \"==PROF== kernels ${12}, at most ${14}\"; shift 14
             echo '  gemm_wgmma_bf16_rc_bf16 (132, 1, 1)x(384, 1, 1), Context 1, Stream 7, Device 0, CC 9.0'
             echo '    Duration                         us        12.50'
             echo '    Compute (SM) Throughput           %        80.10'
             echo '    Memory Throughput                 %        40.20'
             echo '    Warp Cycles Per Issued Instruction  cycle  7.30'
             exec \"$@\"",
        );
        fs::create_dir_all(fake.path("bundle")).unwrap();
        fs::create_dir_all(fake.path("tmp")).unwrap();
        fs::write(fake.path("bundle/MANIFEST.txt"), "commit: fake\nfiles:\n").unwrap();
        write_executable_atomic(&fake.path("bundle/run.sh"), RUN_SH.as_bytes()).unwrap();
        fake.packed(
            "bin/gpu-bench",
            "case $1 in info) echo 'headline: Fake GPU, 1 SM' ;; list) echo gemm ;; \
             gemm) mkdir -p bench && echo '# GEMM' >bench/gemm-fake.md && echo 'headline: gemm ok' ;; esac",
        );
        fake.packed(
            "bin/trainer",
            "mkdir -p bench && echo '# trainer' >bench/trainer-fake.md; echo \"headline: $*\"",
        );
        fake.packed(
            "tests/gemm",
            "echo 'kernel tests on Fake GPU'; echo 'test result: ok. 2 passed; 0 failed; 0 ignored'",
        );
        fake.packed(
            "tests/bad",
            "[ -n \"$FIXED\" ] && { echo 'test result: ok. 2 passed; 0 failed; 0 ignored'; exit 0; }; \
             echo 'test result: FAILED. 1 passed; 1 failed; 0 ignored'; exit 101",
        );
        fake.packed(
            "tests/sim_vs_gpu",
            "echo 'sim_vs_gpu: mma Bf16: largest difference 2.00e-08 of Σ|a·b| + |c| (2 ulp)' >&2; \
             echo 'sim_vs_gpu: mma Tf32: largest difference 0.00e0 of Σ|a·b| + |c| (0 ulp)' >&2; \
             echo 'sim_vs_gpu: `ex2.approx.f32`: largest relative difference 1.250e-7' >&2; \
             echo 'sim_vs_gpu: wgmma_bf16: largest difference 3.00e-08 of Σ|a·b| + |c|' >&2; \
             echo 'sim_vs_gpu: wgmma_tf32: largest difference 1.50e-07 of Σ|a·b| + |c|' >&2; \
             echo 'test result: ok. 3 passed; 0 failed; 0 ignored'",
        );
        fake.packed(
            "tests/chatty",
            "yes 'a hazard reported at length' | head -c 4999980; echo; \
             echo 'test result: ok. 1 passed; 0 failed; 0 ignored'",
        );
        fake.packed("tests/slow", "echo 'test gpu::fast ... ok'; exec sleep 600");
        fake
    }

    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.scratch.0.join(relative)
    }

    pub(crate) fn read(&self, relative: &str) -> String {
        fs::read_to_string(self.path(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
    }

    fn script(&self, relative: &str, body: &str) {
        let path = self.path(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        write_executable_atomic(&path, format!("#!/bin/sh\n{body}\n").as_bytes()).unwrap();
    }

    /// A script under `bundle/`, xz-compressed as the bundle's binaries are (by python3's
    /// lzma, so that the tests need no `xz`).
    fn packed(&self, relative: &str, body: &str) {
        let relative = format!("bundle/{relative}");
        self.script(&relative, body);
        let script = self.path(&relative);
        let compress = "import lzma, sys; data = open(sys.argv[1], 'rb').read(); \
                        open(sys.argv[1] + '.xz', 'wb').write(lzma.compress(data))";
        let status = Command::new("python3").args(["-c", compress]).arg(&script).status().unwrap();
        assert!(status.success(), "compressing {relative}");
        fs::remove_file(script).unwrap();
    }

    /// `run.sh ARGS` from the scratch folder, the fake `nvidia-smi` first on PATH.
    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let path = std::env::var("PATH").unwrap_or_default();
        let mut command = Command::new("bash");
        command
            .arg(self.path("bundle/run.sh"))
            .args(args)
            .current_dir(&self.scratch.0)
            // run.sh's work folder, which a killed run cannot remove, goes with the scratch.
            .env("TMPDIR", self.path("tmp"))
            .env("PATH", format!("{}:{path}", self.path("fakebin").display()))
            .env_remove("TESTS")
            .env_remove("BENCHMARKS")
            .env_remove("RUN_BUDGET")
            .env_remove("FIXED")
            .env_remove("BENCH_PRECISIONS")
            .env_remove("GEMM_ENGINE")
            .env_remove("WGMMA_TILE")
            .env_remove("CLASSIFIER")
            .env_remove("SANITIZE_TOOLS")
            .env_remove("TESTS_FIRST")
            .env_remove("SANITIZE_PROBE")
            .env_remove("LADDER_RUNGS")
            .env_remove("PROFILE_STEP")
            .env_remove("PROFILE_GEMMS")
            .env_remove("PROFILE_VARIANT")
            .env_remove("TIMEOUT_TESTS")
            .env_remove("GPU_HOST_CUBIN_DIR")
            .env_remove("GPU_HOST_PTX_DIR")
            .envs(env.iter().copied());
        command
    }

    pub(crate) fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args, env).output().unwrap()
    }

    fn archive_listing(&self, relative: &str) -> String {
        let out = Command::new("tar").arg("-tzf").arg(self.path(relative)).output().unwrap();
        assert!(out.status.success(), "tar -tzf {relative}: {}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    }
}

/// Whether `table` has a row `| BEFORE... | SECONDS | AFTER... |`, SECONDS any whole number
/// (wall-clock time, which a loaded machine stretches).
pub(crate) fn has_row(table: &str, before: &[&str], after: &[&str]) -> bool {
    let head = format!("| {} | ", before.join(" | "));
    let tail = format!(" | {} |", after.join(" | "));
    table.lines().any(|line| {
        line.strip_prefix(&head).and_then(|rest| rest.strip_suffix(&tail)).is_some_and(|seconds| {
            !seconds.is_empty() && seconds.bytes().all(|b| b.is_ascii_digit())
        })
    })
}

pub(crate) fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}
