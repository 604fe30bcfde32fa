//! The CUDA backend end to end on the PTX simulator: the same launches a GPU gets, every
//! kernel interpreted with its bounds, race and alignment checks, against the CPU backend.
//!
//! The model is tiny (L=2, C=128 in 2 heads of 64 so flash attention applies, V=96 padded to
//! 128, B=2, T=16) so the whole file takes seconds to a minute of simulation.

use crate::common::{
    CyclingBatches, Files, FixedBatch, arg, metrics, one_step_grads, plain_adamw, tokens,
};
use crate::common::{random_params, trainer_ok};
use gpu_host::kernels::classifier::ClassifierPath;
use gpu_host::kernels::gemm::{GemmEngine, WeightGrads, WgmmaTile};
use ptx_sim::Simulator;
use std::collections::BTreeMap;
use trainer::backend::op_times::{OpClock, OpTimes};
use trainer::backend::op_work::Work;
use trainer::backend::ops::AttentionKind;
use trainer::backend::{Backend, BackendJob, Compute, Precision, ResolvedDevice, TunedGemm};
use trainer::loss_scale::{LossScaleConfig, LossScaler};
use trainer::model::{Gpt2, Gpt2Config, ModelOptions, Params};
use trainer::train::{BatchShape, Session, StepOutput};

const B: usize = 2;
const T: usize = 16;

const fn config() -> Gpt2Config {
    Gpt2Config {
        max_seq_len: 32,
        vocab_size: 96,
        padded_vocab_size: 128,
        num_layers: 2,
        num_heads: 2,
        channels: 128,
    }
}

fn sim() -> ResolvedDevice {
    ResolvedDevice::Sim(Simulator::new().expect("cargo xtask build-ptx has run"))
}

fn batch(seed: u64) -> FixedBatch {
    let toks = tokens(B * T + 1, config().vocab_size, seed);
    let widen = |x: &[u16]| x.iter().map(|&v| u32::from(v)).collect::<Vec<_>>();
    FixedBatch { inputs: widen(&toks[..B * T]), targets: widen(&toks[1..]) }
}

fn params() -> Params<Vec<f32>> {
    random_params(&config(), 0.05, 11)
}

/// One forward/backward on whatever backend it is run on.
struct GradJob(ModelOptions);

impl BackendJob for GradJob {
    type Output = (f32, Params<Vec<f32>>);
    fn run<B: Backend>(self, backend: &B) -> trainer::Result<Self::Output> {
        Ok(one_step_grads(backend, &config(), &params(), self.0, &mut batch(5), (B, T)))
    }
}

/// The test model from [`params`] in a session of B × T with two micro-batches per step.
fn two_micro_batch_session<Bk: Backend>(
    backend: &Bk,
    options: ModelOptions,
) -> trainer::Result<Session<'_, Bk>> {
    let model = Gpt2::new(backend, config(), &params(), options)?;
    let shape = BatchShape { b: B, t: T, grad_accum_steps: 2 };
    Session::new(backend, model, plain_adamw(), shape)
}

/// `steps` optimizer steps from [`params`], the two micro-batches of each step different (the
/// same two every step): each step's output.
struct TrainJob {
    options: ModelOptions,
    steps: u32,
}

impl BackendJob for TrainJob {
    type Output = Vec<StepOutput>;
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<Vec<StepOutput>> {
        let mut session = two_micro_batch_session(backend, self.options)?;
        let mut data = CyclingBatches { batches: vec![batch(6), batch(16)], next: 0 };
        (1..=self.steps).map(|t| session.train_step(&mut data, 1e-3, t)).collect()
    }
}

/// [`TrainJob`], returning the GEMMs the backend tuned too.
struct TunedTrainJob(TrainJob);

impl BackendJob for TunedTrainJob {
    type Output = (Vec<StepOutput>, Vec<TunedGemm>);
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<Self::Output> {
        let steps = self.0.run(backend)?;
        Ok((steps, backend.tuned_gemms()))
    }
}

fn worst_relative(got: &[f32], want: &[f32]) -> (f64, f64) {
    let scale = want.iter().fold(0.0f64, |m, &w| m.max(f64::from(w).abs()));
    let worst = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| if g.is_nan() { f64::INFINITY } else { f64::from(g - w).abs() })
        .fold(0.0, f64::max);
    (worst, scale)
}

/// fp32 on the simulator computes the loss and every gradient tensor of the CPU backend, up
/// to summation order: any wrong op, index or constant shows. The attention's products with
/// the head dimension (N = hd = 64) run on the SIMT kernel's 128 × 64 tile, the others on the
/// 128 × 128 one; the classifier stages its rows in shared memory.
#[test]
fn fp32_gradients_match_the_cpu_tensor_by_tensor() {
    let naive = ModelOptions { attention: AttentionKind::Naive, fuse: true };
    for options in [naive, ModelOptions { fuse: false, ..naive }] {
        let (want_loss, want) = ResolvedDevice::Cpu.run(Precision::Fp32, GradJob(naive)).unwrap();
        let device = sim();
        let (loss, got) = device.run(Precision::Fp32, GradJob(options)).unwrap();
        let ResolvedDevice::Sim(simulator) = &device else { unreachable!("a simulator") };
        let counts = simulator.launch_counts();
        let names = ["gemm_simt_n64_rr_f32", "gemm_simt_n64_cr_f32", "gemm_simt_rc_f32"];
        for name in names.into_iter().chain(["fused_classifier_staged_f32"]) {
            assert!(counts.contains_key(name), "{name} never ran: {counts:?}");
        }
        assert!((loss - want_loss).abs() < 2e-6, "{options:?}: loss {loss} vs {want_loss}");
        for ((kind, g), (_, w)) in got.iter().zip(want.iter()) {
            let (worst, scale) = worst_relative(g, w);
            assert!(
                worst <= 2e-5 * scale + 1e-9,
                "{options:?} {}: max error {worst:e} (max |grad| {scale:e})",
                kind.name()
            );
        }
    }
}

/// One forward/backward, its gradients divided by the fp16 loss scale (the gradients of the
/// loss itself in every precision).
struct UnscaledGradJob(ModelOptions);

impl BackendJob for UnscaledGradJob {
    type Output = (f32, Params<Vec<f32>>);
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<Self::Output> {
        let model = Gpt2::new(backend, config(), &params(), self.0)?;
        let shape = BatchShape { b: B, t: T, grad_accum_steps: 1 };
        let mut session = Session::new(backend, model, plain_adamw(), shape)?;
        let loss = session.forward_backward(&mut batch(5))?;
        let unscale = session.scaler().map_or(1.0, LossScaler::unscale_factor);
        let mut grads = session.grads()?;
        grads.iter_mut().for_each(|(_, g)| g.iter_mut().for_each(|x| *x *= unscale));
        Ok((loss, grads))
    }
}

/// bf16 and fp16 on the simulator, flash and naive attention, give every gradient tensor of
/// the CPU's fp32 backward within the 16-bit arithmetic's error (measured, these fixed inputs:
/// at most 1.0e-2 of each tensor's largest value in bf16, 1.7e-3 in fp16; the bounds allow
/// 2.5×): a wrongly wired tensor (flash attention's saved statistics of another layer, the
/// gradient of the wrong activation) moves a tensor by far more.
#[test]
fn sixteen_bit_gradients_match_the_cpu_tensor_by_tensor() {
    let naive = ModelOptions { attention: AttentionKind::Naive, fuse: true };
    let flash = ModelOptions { attention: AttentionKind::Flash, fuse: true };
    let (want_loss, want) = ResolvedDevice::Cpu.run(Precision::Fp32, GradJob(naive)).unwrap();
    let cases = [
        (Precision::Bf16, flash, 2.5e-2, 2e-3),
        (Precision::Fp16, flash, 4e-3, 4e-4),
        (Precision::Bf16, naive, 2.5e-2, 2e-3),
    ];
    for (precision, options, grad_tol, loss_tol) in cases {
        let (loss, got) = sim().run(precision, UnscaledGradJob(options)).unwrap();
        let what = format!("{} {options:?}", precision.name());
        assert!((loss - want_loss).abs() < loss_tol, "{what}: loss {loss} vs {want_loss}");
        for ((kind, g), (_, w)) in got.iter().zip(want.iter()) {
            let (worst, scale) = worst_relative(g, w);
            assert!(
                worst <= grad_tol * scale,
                "{what} {}: max error {worst:e} (max |grad| {scale:e})",
                kind.name()
            );
        }
    }
}

/// One forward/backward of the test model with an unaligned vocabulary: 93 tokens, unpadded,
/// so the CUDA backend stores the logits' rows 96 apart (`Backend::logits_stride`), and the
/// classifier, the lm head's GEMMs and the gradient all read strided rows.
struct OddVocabGradJob;

impl OddVocabGradJob {
    const CONFIG: Gpt2Config = Gpt2Config { vocab_size: 93, padded_vocab_size: 93, ..config() };
}

impl BackendJob for OddVocabGradJob {
    /// The logits' row stride, the loss and the gradients.
    type Output = (usize, f32, Params<Vec<f32>>);
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<Self::Output> {
        let cfg = Self::CONFIG;
        let toks = tokens(B * T + 1, cfg.vocab_size, 5);
        let widen = |x: &[u16]| x.iter().map(|&v| u32::from(v)).collect::<Vec<_>>();
        let mut batch = FixedBatch { inputs: widen(&toks[..B * T]), targets: widen(&toks[1..]) };
        let naive = ModelOptions { attention: AttentionKind::Naive, fuse: true };
        let params = random_params(&cfg, 0.05, 11);
        let (loss, grads) = one_step_grads(backend, &cfg, &params, naive, &mut batch, (B, T));
        Ok((backend.logits_stride(cfg.padded_vocab_size), loss, grads))
    }
}

/// An unaligned vocabulary trains in strided logits: fp32 on the simulator gives the CPU's
/// (dense) loss and gradients up to summation order, and bf16 on the Hopper module, where the
/// strided rows let the lm head's GEMMs run on wgmma, within bf16's error.
#[test]
fn unaligned_vocabularies_train_in_strided_logits() {
    let (ld, want_loss, want) = ResolvedDevice::Cpu.run(Precision::Fp32, OddVocabGradJob).unwrap();
    assert_eq!(ld, 93, "the CPU's logits are dense");
    let hopper = ResolvedDevice::Sim(Simulator::hopper().expect("cargo xtask build-ptx has run"));
    let cases = [(&sim(), Precision::Fp32, 2e-5, 2e-6), (&hopper, Precision::Bf16, 2.5e-2, 2e-3)];
    for (device, precision, grad_tol, loss_tol) in cases {
        let (ld, loss, got) = device.run(precision, OddVocabGradJob).unwrap();
        let what = precision.name();
        assert_eq!(ld, 96, "{what}: rows padded to 16 bytes");
        assert!((loss - want_loss).abs() < loss_tol, "{what}: loss {loss} vs {want_loss}");
        for ((kind, g), (_, w)) in got.iter().zip(want.iter()) {
            let (worst, scale) = worst_relative(g, w);
            assert!(
                worst <= grad_tol * scale + 1e-9,
                "{what} {}: max error {worst:e} (max |grad| {scale:e})",
                kind.name()
            );
        }
    }
    // Every bf16 GEMM ran on wgmma, the lm head's included: none fell back to mma.sync.
    let ResolvedDevice::Sim(hopper_sim) = &hopper else { unreachable!("a simulator") };
    let counts = hopper_sim.launch_counts();
    assert!(!counts.keys().any(|k| k.starts_with("gemm_bf16")), "{counts:?}");
}

/// TF32 computes the same on both GEMM engines. On the Hopper module the forward GEMMs, the input
/// gradients (against transposed weights) and the attention's `Q·Kᵀ` and `dY·Vᵀ` run on wgmma,
/// which reads TF32 operands by truncation, so the backend and the attention round them to
/// nearest first (the lm head's `dY`, the logits' gradient, the classifier stores rounded); on
/// the sm_80 module every GEMM runs on mma.sync, which rounds them itself. The simulator sums each k8 step of both instructions the
/// same way, so one step's loss and gradients agree bit for bit (with the operands truncated
/// they differ by 1.9e-4 in the loss and up to 3e-3 of a tensor's largest gradient).
#[test]
fn tf32_gradients_do_not_depend_on_the_gemm_engine() {
    let naive = ModelOptions { attention: AttentionKind::Naive, fuse: true };
    let hopper = ResolvedDevice::Sim(Simulator::hopper().expect("cargo xtask build-ptx has run"));
    let (loss, got) = hopper.run(Precision::Tf32, UnscaledGradJob(naive)).unwrap();
    // The forward GEMMs and the input gradients (dY·(Wᵀ)ᵀ, with W transposed) ran on wgmma.
    let ResolvedDevice::Sim(hopper_sim) = &hopper else { unreachable!("a simulator") };
    let counts = hopper_sim.launch_counts();
    for name in ["gemm_wgmma_tf32_rc_f32", "transpose_f32", "round_tf32_f32"] {
        assert!(counts.contains_key(name), "{name} never ran: {counts:?}");
    }
    let (want_loss, want) = sim().run(Precision::Tf32, UnscaledGradJob(naive)).unwrap();
    assert_eq!(loss.to_bits(), want_loss.to_bits(), "loss {loss} vs {want_loss}");
    for ((kind, g), (_, w)) in got.iter().zip(want.iter()) {
        let (worst, scale) = worst_relative(g, w);
        assert_eq!(worst, 0.0, "{}: max error {worst:e} (max |grad| {scale:e})", kind.name());
    }
}

/// `--gemm-engine` reaches every GEMM: on the simulator's sm_80 module `MmaSync` runs the
/// kernels `Auto` runs there (the same losses and norms, bit for bit), and `Wgmma`, which that
/// module lacks, fails naming why.
#[test]
fn gemm_engine_choice_reaches_the_gemms() {
    let on = |gemm_engine| Compute { gemm_engine, ..Compute::from(Precision::Bf16) };
    let job = || TrainJob { options: ModelOptions::default(), steps: 1 };
    let bits = |steps: Vec<StepOutput>| -> Vec<(u32, u32)> {
        steps.iter().map(|s| (s.loss.to_bits(), s.grad_norm.to_bits())).collect()
    };
    let auto = bits(sim().run(on(GemmEngine::Auto), job()).unwrap());
    let mma = bits(sim().run(on(GemmEngine::MmaSync), job()).unwrap());
    assert_eq!(auto, mma);
    let err = sim().run(on(GemmEngine::Wgmma), job()).unwrap_err().to_string();
    assert!(err.contains("--gemm-engine wgmma needs the Hopper module") && err.contains("sm_80"));
    // On the Hopper module: the FP32 rung runs the SIMT kernel whatever the engine, and TF32
    // cannot run every GEMM on wgmma, which is said before the model is built.
    let hopper =
        || ResolvedDevice::Sim(Simulator::hopper().expect("cargo xtask build-ptx has run"));
    let fp32 = Compute { gemm_engine: GemmEngine::Wgmma, ..Compute::from(Precision::Fp32) };
    let forced = bits(hopper().run(fp32, job()).unwrap());
    let simt = bits(hopper().run(Compute::from(Precision::Fp32), job()).unwrap());
    assert_eq!(forced, simt);
    let tf32 = Compute { gemm_engine: GemmEngine::Wgmma, ..Compute::from(Precision::Tf32) };
    let err = hopper().run(tf32, job()).unwrap_err().to_string();
    assert!(err.contains("cannot train in tf32"), "{err}");
}

/// `--classifier` reaches the classifier: the staged kernel and the one that reads each row
/// twice train to the same losses and gradient norms, bit for bit (fp32 and bf16), and each
/// run launched its kernel only.
#[test]
fn classifier_choice_reaches_the_classifier() {
    let job = || TrainJob { options: ModelOptions::default(), steps: 2 };
    let bits = |steps: Vec<StepOutput>| -> Vec<(u32, u32)> {
        steps.iter().map(|s| (s.loss.to_bits(), s.grad_norm.to_bits())).collect()
    };
    for (precision, ty) in [(Precision::Fp32, "f32"), (Precision::Bf16, "bf16")] {
        let (staged, two_reads) =
            (format!("fused_classifier_staged_{ty}"), format!("fused_classifier_{ty}"));
        let mut runs = Vec::new();
        for (classifier, ran, not) in [
            (ClassifierPath::Staged, &staged, &two_reads),
            (ClassifierPath::TwoReads, &two_reads, &staged),
        ] {
            let device = sim();
            let compute = Compute { classifier, ..Compute::from(precision) };
            runs.push(bits(device.run(compute, job()).unwrap()));
            let ResolvedDevice::Sim(sim) = &device else { unreachable!("a simulator") };
            let counts = sim.launch_counts();
            assert!(counts.contains_key(ran.as_str()), "{ran} never ran: {counts:?}");
            assert!(!counts.contains_key(not.as_str()), "{not} ran: {counts:?}");
        }
        assert_eq!(runs[0], runs[1], "{ty}: staged vs two reads");
    }
}

/// The gradients of one step of two micro-batches from a fresh session, and from one whose
/// gradient arena was filled with NaN first (every tensor's bits, twice).
struct PoisonedArenaJob(ModelOptions);

impl BackendJob for PoisonedArenaJob {
    type Output = [Vec<u32>; 2];
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<Self::Output> {
        let grads = |poison: bool| -> trainer::Result<Vec<u32>> {
            let mut session = two_micro_batch_session(backend, self.0)?;
            if poison {
                let mut nan = params();
                nan.iter_mut().for_each(|(_, g)| g.fill(f32::NAN));
                session.set_grads(&nan)?;
            }
            let mut data = CyclingBatches { batches: vec![batch(6), batch(16)], next: 0 };
            session.forward_backward(&mut data)?;
            let grads = session.grads()?;
            Ok(grads.iter().flat_map(|(_, g)| g.iter().map(|x| x.to_bits())).collect())
        };
        Ok([grads(false)?, grads(true)?])
    }
}

/// A step's first micro-batch writes every gradient over the previous step's without reading
/// them (`GradWrite::Replace`: the arena is never zeroed): after an arena full of NaN, each
/// backend, precision and attention path gives the bits of a fresh session. A GEMM, bias or
/// layernorm reduction that read its old values, or a gradient element no op writes (wpe's
/// rows past T), would keep a NaN.
#[test]
fn first_micro_batch_overwrites_the_gradients_without_reading_them() {
    let naive = ModelOptions { attention: AttentionKind::Naive, fuse: true };
    let flash = ModelOptions { attention: AttentionKind::Flash, fuse: true };
    let hopper =
        || ResolvedDevice::Sim(Simulator::hopper().expect("cargo xtask build-ptx has run"));
    let cases = [
        ("cpu fp32", ResolvedDevice::Cpu, Precision::Fp32, naive),
        ("sim fp32 unfused", sim(), Precision::Fp32, ModelOptions { fuse: false, ..naive }),
        ("sim tf32", sim(), Precision::Tf32, naive),
        ("sim bf16 flash", sim(), Precision::Bf16, flash),
        ("hopper fp16 flash", hopper(), Precision::Fp16, flash),
    ];
    for (what, device, precision, options) in cases {
        let [fresh, poisoned] = device.run(precision, PoisonedArenaJob(options)).unwrap();
        assert!(fresh.iter().all(|&x| f32::from_bits(x).is_finite()), "{what}: fresh run");
        let first_difference = fresh.iter().zip(&poisoned).position(|(a, b)| a != b);
        assert_eq!(first_difference, None, "{what}: after a NaN arena");
    }
}

/// Asserts that every step of `got` applied and that its loss and gradient norm are within
/// `tol` (relative; 10·`tol` for the norm) of `want`'s, the CPU's fp32 run.
fn assert_trains_like(what: &str, got: &[StepOutput], want: &[StepOutput], tol: f32) {
    for (step, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(!g.skipped, "{what} step {step}: skipped");
        assert!(
            (g.loss - w.loss).abs() <= tol * w.loss,
            "{what} step {step}: loss {} vs {}",
            g.loss,
            w.loss
        );
        let norm_tol = 10.0 * tol * w.grad_norm + 1e-6;
        assert!(
            (g.grad_norm - w.grad_norm).abs() <= norm_tol,
            "{what} step {step}: grad norm {} vs {}",
            g.grad_norm,
            w.grad_norm
        );
    }
}

/// Every precision and attention path trains: three steps of two micro-batches each, losses
/// within the precision's tolerance of the CPU's fp32 run.
#[test]
fn every_precision_and_attention_trains_like_the_cpu() {
    let options = |attention, fuse| ModelOptions { attention, fuse };
    let want = ResolvedDevice::Cpu
        .run(Precision::Fp32, TrainJob { options: ModelOptions::default(), steps: 3 })
        .unwrap();
    let naive = AttentionKind::Naive;
    let flash = AttentionKind::Flash;
    let runs = [
        (Precision::Fp32, options(naive, true), 1e-5),
        (Precision::Tf32, options(naive, true), 5e-3),
        (Precision::Bf16, options(naive, true), 4e-2),
        (Precision::Bf16, options(flash, true), 4e-2),
        (Precision::Bf16, options(flash, false), 4e-2),
        (Precision::Fp16, options(naive, true), 1e-2),
        (Precision::Fp16, options(flash, true), 1e-2),
    ];
    let device = sim();
    for (precision, options, tol) in runs {
        let got = device.run(precision, TrainJob { options, steps: 3 }).unwrap();
        assert_trains_like(&format!("{} {options:?}", precision.name()), &got, &want, tol);
        assert!(got[2].loss < got[0].loss, "{} {options:?}: the loss falls", precision.name());
    }
}

/// The sm_90a module, as a Hopper GPU loads it: every kernel compiled for sm_90a, and every
/// 16-bit GEMM of the step on the wgmma kernel (forward, `dX`, `dW`, the naive attention's
/// batched head GEMMs, flash attention's products; the simulator's launch counts show it).
/// TF32 (its weight gradients on `mma.sync`), BF16 and FP16 train like the CPU's fp32 run, and
/// so does BF16 on the ping-pong and deferred-epilogue kernels (`--wgmma-tile pingpong`,
/// `deferred`), the latter with the weight gradients on stream-K (`--weight-grads stream-k`).
#[test]
fn the_hopper_module_trains_like_the_cpu() {
    let want = ResolvedDevice::Cpu
        .run(Precision::Fp32, TrainJob { options: ModelOptions::default(), steps: 3 })
        .unwrap();
    let hopper = ResolvedDevice::Sim(Simulator::hopper().expect("cargo xtask build-ptx has run"));
    let naive = ModelOptions { attention: AttentionKind::Naive, fuse: true };
    let flash = ModelOptions { attention: AttentionKind::Flash, fuse: true };
    let on = |precision, gemm_engine| Compute { gemm_engine, ..Compute::from(precision) };
    let runs = [
        (on(Precision::Tf32, GemmEngine::Auto), naive, 5e-3),
        (on(Precision::Bf16, GemmEngine::Auto), naive, 4e-2),
        (on(Precision::Bf16, GemmEngine::Wgmma), flash, 4e-2),
        (on(Precision::Fp16, GemmEngine::Auto), flash, 1e-2),
    ];
    for (compute, options, tol) in runs {
        let what = format!("{} {:?} {options:?}", compute.precision.name(), compute.gemm_engine);
        let got = hopper.run(compute, TrainJob { options, steps: 3 }).unwrap();
        assert_trains_like(&what, &got, &want, tol);
    }
    // `Auto` ran the Hopper GEMM, in every layout, and no mma.sync GEMM for BF16 / FP16.
    let ResolvedDevice::Sim(sim) = &hopper else { unreachable!("a simulator") };
    let counts = sim.launch_counts();
    for layouts in ["rc", "rr", "cr"] {
        let name = format!("gemm_wgmma_bf16_{layouts}_bf16");
        assert!(counts.contains_key(name.as_str()), "{name} never ran: {counts:?}");
    }
    let mma_16bit =
        counts.keys().filter(|k| k.starts_with("gemm_bf16") || k.starts_with("gemm_f16"));
    assert_eq!(mma_16bit.count(), 0, "{counts:?}");
    // Flash attention's forward, dK/dV and dQ ran on wgmma too (BF16 with the engine forced,
    // FP16 on `Auto`), never on mma.sync.
    for kernel in ["forward", "backward_dkdv", "backward_dq"] {
        for ty in ["bf16", "f16"] {
            let name = format!("flash_attention_{kernel}_wgmma_{ty}");
            assert!(counts.contains_key(name.as_str()), "{name} never ran: {counts:?}");
            let mma = format!("flash_attention_{kernel}_{ty}");
            assert!(!counts.contains_key(mma.as_str()), "{mma} ran: {counts:?}");
        }
    }
    // `--wgmma-tile 256`: the wide kernels for the forward, dX and dW GEMMs.
    let dw = "gemm_wgmma_bf16_cr_bf16";
    let wide = Compute { wgmma_tile: WgmmaTile::N256, ..on(Precision::Bf16, GemmEngine::Auto) };
    hopper.run(wide, TrainJob { options: naive, steps: 1 }).unwrap();
    let after = sim.launch_counts();
    for layouts in ["rc", "rr", "cr"] {
        let name = format!("gemm_wgmma_n256_bf16_{layouts}_bf16");
        let before = counts.get(name.as_str()).copied().unwrap_or(0);
        assert!(after.get(name.as_str()).copied().unwrap_or(0) > before, "{name}: {after:?}");
    }
    // `--wgmma-tile pingpong`: the ping-pong kernels likewise, training like the CPU; dW,
    // which has none, stays on 128 × 128 instead of failing.
    let pingpong =
        Compute { wgmma_tile: WgmmaTile::PingPong, ..on(Precision::Bf16, GemmEngine::Auto) };
    let got = hopper.run(pingpong, TrainJob { options: naive, steps: 3 }).unwrap();
    assert_trains_like("bf16 ping-pong", &got, &want, 4e-2);
    let last = sim.launch_counts();
    for name in ["gemm_wgmma_pp_bf16_rc_bf16", "gemm_wgmma_pp_bf16_rr_bf16"] {
        assert!(last.contains_key(name), "{name} never ran: {last:?}");
    }
    assert!(last[dw] > after[dw], "{last:?}");
    // `--wgmma-tile deferred`: the deferred-epilogue kernels likewise (GELU and its backward
    // with the column sums included), dW again on 128 × 128.
    let deferred =
        Compute { wgmma_tile: WgmmaTile::Deferred, ..on(Precision::Bf16, GemmEngine::Auto) };
    let got = hopper.run(deferred, TrainJob { options: naive, steps: 3 }).unwrap();
    assert_trains_like("bf16 deferred", &got, &want, 4e-2);
    let deferred_counts = sim.launch_counts();
    for name in ["gemm_wgmma_de_bf16_rc_bf16", "gemm_wgmma_de_bf16_rr_bf16"] {
        assert!(deferred_counts.contains_key(name), "{name} never ran: {deferred_counts:?}");
    }
    assert!(deferred_counts[dw] > last[dw], "{deferred_counts:?}");
    // `--wgmma-tile deferred --weight-grads stream-k`: the weight gradients on the stream-K
    // kernels (here one k-tile a tile, so whole segments: the GEMM suite runs the partial
    // ones), the rest deferred, training like the CPU.
    let stream_k = Compute { weight_grads: WeightGrads::StreamK, ..deferred };
    let got = hopper.run(stream_k, TrainJob { options: naive, steps: 3 }).unwrap();
    assert_trains_like("bf16 deferred, stream-K weight gradients", &got, &want, 4e-2);
    let stream_k_counts = sim.launch_counts();
    for name in ["gemm_wgmma_sk_bf16_cr_f32", "gemm_wgmma_de_bf16_rc_bf16"] {
        let count = |counts: &BTreeMap<&str, u64>| counts.get(name).copied().unwrap_or(0);
        let ran = count(&stream_k_counts) > count(&deferred_counts);
        assert!(ran, "{name} did not run: {stream_k_counts:?}");
    }
    // Every weight gradient (f32 output) went to stream-K: none to the 128 × 128 tiles.
    let narrow_dw = "gemm_wgmma_bf16_cr_f32";
    assert_eq!(stream_k_counts[narrow_dw], deferred_counts[narrow_dw], "{stream_k_counts:?}");
}

/// `--wgmma-tile tuned` on the Hopper module: each forward and input-gradient GEMM, and each
/// unsplit weight gradient, times every tile that takes it on its first call, once per GEMM
/// (every layer's fc forward is one), and the training has the bits of `Auto`'s (the tiles
/// compute the same bits).
#[test]
fn tuned_tiles_train_with_the_bits_of_auto() {
    let hopper = ResolvedDevice::Sim(Simulator::hopper().expect("cargo xtask build-ptx has run"));
    let job = || {
        let options = ModelOptions { attention: AttentionKind::Naive, fuse: true };
        TunedTrainJob(TrainJob { options, steps: 2 })
    };
    let auto = Compute::from(Precision::Bf16);
    let (want, untuned) = hopper.run(auto, job()).unwrap();
    assert!(untuned.is_empty(), "{untuned:?}");
    let tuned = Compute { wgmma_tile: WgmmaTile::Tuned, ..auto };
    let (got, gemms) = hopper.run(tuned, job()).unwrap();
    for (step, (g, w)) in got.iter().zip(&want).enumerate() {
        let bits = |s: &StepOutput| (s.loss.to_bits(), s.grad_norm.to_bits());
        assert_eq!(bits(g), bits(w), "step {step}: {g:?} against {w:?}");
    }
    let ops: Vec<&str> = gemms.iter().map(|g| g.op.as_str()).collect();
    for op in ["matmul forward fc", "matmul forward lm head", "matmul backward fc projection dX"] {
        assert!(ops.contains(&op), "{op} not tuned: {ops:?}");
    }
    // The unsplit weight gradients too (here the lm head's); split ones never.
    assert!(ops.contains(&"matmul backward lm head dW"), "{ops:?}");
    for (i, g) in gemms.iter().enumerate() {
        assert!(g.timings.len() >= 2, "{g:?}");
        assert!(g.timings.iter().any(|&(tile, _)| tile == g.chosen), "{g:?}");
        let again = gemms[..i].iter().any(|h| (&h.shape, &h.epilogue) == (&g.shape, &g.epilogue));
        assert!(!again, "tuned twice: {g:?}");
    }
    let fc_dx = gemms.iter().find(|g| g.op == "matmul backward fc projection dX").unwrap();
    assert_eq!(fc_dx.epilogue, "GELU backward, column sums");
}

/// Four steps in one session, or two, then the parameters, moments (and loss scaler) moved to
/// a fresh session, then two more: the same bits.
struct ResumeJob {
    options: ModelOptions,
}

impl BackendJob for ResumeJob {
    type Output = ();
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<()> {
        let shape = BatchShape { b: B, t: T, grad_accum_steps: 1 };
        let session = |params: &Params<Vec<f32>>| {
            let model = Gpt2::new(backend, config(), params, self.options)?;
            Session::new(backend, model, plain_adamw(), shape)
        };
        // fp16: a scale that grows after 3 clean steps, so that it changes between the
        // checkpoint (step 2) and the end (step 4): a resume that lost the scaler's clean-step
        // count would scale step 4 differently.
        let growing = LossScaleConfig { growth_interval: 3, ..LossScaleConfig::default() };
        let grow_fast = |s: &mut Session<'_, Bk>| {
            if s.scaler().is_some() {
                s.set_scaler(LossScaler::new(growing));
            }
        };
        let mut data = batch(7);
        let mut straight = session(&params())?;
        grow_fast(&mut straight);
        for t in 1..=4 {
            straight.train_step(&mut data, 1e-3, t)?;
        }
        if let Some(scaler) = straight.scaler() {
            assert_eq!(scaler.scale(), 2.0 * growing.init_scale, "the scale grew once");
        }
        let mut data = batch(7);
        let mut first = session(&params())?;
        grow_fast(&mut first);
        for t in 1..=2 {
            first.train_step(&mut data, 1e-3, t)?;
        }
        let [m, v] = first.moments()?;
        let mut resumed = session(&first.params()?)?;
        resumed.set_moments(&m, &v)?;
        if let Some(scaler) = first.scaler() {
            resumed.set_scaler(scaler.clone());
        }
        for t in 3..=4 {
            resumed.train_step(&mut data, 1e-3, t)?;
        }
        assert!(straight.params()? == resumed.params()?, "{:?}: parameters differ", self.options);
        assert!(straight.moments()? == resumed.moments()?, "{:?}: moments differ", self.options);
        assert_eq!(straight.scaler(), resumed.scaler(), "{:?}: loss scalers differ", self.options);
        Ok(())
    }
}

#[test]
fn resume_on_the_simulator_is_bit_exact() {
    let device = sim();
    let flash = ModelOptions { attention: AttentionKind::Flash, fuse: true };
    device.run(Precision::Fp32, ResumeJob { options: ModelOptions::default() }).unwrap();
    device.run(Precision::Bf16, ResumeJob { options: flash }).unwrap();
    device.run(Precision::Fp16, ResumeJob { options: flash }).unwrap();
}

/// A loss scale far too large overflows the fp16 gradients: the scaler skips the update
/// (parameters untouched), halves the scale, and training goes on once it fits.
struct OverflowJob;

impl BackendJob for OverflowJob {
    type Output = ();
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<()> {
        let model = Gpt2::new(backend, config(), &params(), ModelOptions::default())?;
        let shape = BatchShape { b: B, t: T, grad_accum_steps: 1 };
        let mut session = Session::new(backend, model, plain_adamw(), shape)?;
        let huge = LossScaleConfig { init_scale: 16_777_216.0, ..LossScaleConfig::default() };
        session.set_scaler(LossScaler::new(huge));
        let before = session.params()?;
        let moments_before = session.moments()?;
        let mut data = batch(8);
        let first = session.train_step(&mut data, 1e-3, 1)?;
        assert!(first.skipped, "a 2^24 loss scale overflows fp16: {first:?}");
        assert!(first.loss.is_finite());
        assert_eq!(first.loss_scale, Some(16_777_216.0));
        assert!(session.params()? == before, "a skipped step leaves the parameters alone");
        assert!(session.moments()? == moments_before, "a skipped step leaves the moments alone");
        assert_eq!(session.scaler().map(LossScaler::scale), Some(8_388_608.0));
        let mut t = 1;
        while session.train_step(&mut data, 1e-3, t)?.skipped {
            t += 1;
            assert!(t < 20, "the scale never came down");
        }
        let after = session.params()?;
        assert!(after != before, "an applied step changes the parameters");
        let finite = |p: &Params<Vec<f32>>| p.iter().all(|(_, t)| t.iter().all(|x| x.is_finite()));
        assert!(finite(&after), "the applied step left non-finite parameters");
        Ok(())
    }
}

#[test]
fn fp16_loss_scaler_skips_an_overflowing_step() {
    sim().run(Precision::Fp16, OverflowJob).unwrap();
}

/// `trainer train --device sim` end to end: the binary, the data loader, metrics with
/// tokens/s, the checkpoint written from the simulator's master weights.
#[test]
fn cli_trains_on_the_simulator() {
    let config = config();
    let files = Files::new(&config, 4, 400, 100);
    let metrics_path = files.path("metrics.jsonl");
    let out = trainer_ok(&[
        "train",
        "--device",
        "sim",
        "--precision",
        "bf16",
        "--init",
        &arg(&files.ckpt),
        "--train-data",
        &arg(&files.train),
        "--batch-size",
        "2",
        "--seq-len",
        "16",
        "--steps",
        "2",
        "--checkpoint-dir",
        &arg(&files.path("ckpt")),
        "--metrics-jsonl",
        &arg(&metrics_path),
        // The GEMM flags the GPU bundle passes (no effect on the sm_80 module).
        "--gemm-engine",
        "auto",
        "--wgmma-tile",
        "256",
    ]);
    assert!(out.contains("PTX simulator") || out.contains("bf16"), "{out}");
    assert!(out.contains("flash attention"), "head size 64 in bf16 defaults to flash: {out}");
    assert!(out.contains("128×256 wgmma tiles"), "the forced tile is reported: {out}");
    let records = metrics(&metrics_path);
    assert_eq!(records.len(), 2);
    assert!(records[1]["train_loss"].as_f64().unwrap().is_finite());
    // From the f32 master weights, not the bf16 working copy: after two updates of 1e-3 or so
    // most values are not bf16 numbers.
    let saved = trainer::checkpoint::read_model(&files.path("ckpt/model_00000002.bin")).unwrap();
    let values: Vec<f32> = saved.params.iter().flat_map(|(_, t)| t.iter().copied()).collect();
    let in_bf16 = values.iter().filter(|&&v| half::bf16::from_f32(v).to_f32() == v).count();
    assert!(in_bf16 < values.len() / 2, "{in_bf16} of {} saved values are bf16", values.len());
}

/// A simulator with 4 MiB of device memory holds the tiny model but not the training state
/// of a large batch: the error names the buffer, the sizes, and what to do.
#[test]
fn out_of_memory_names_the_buffer_and_advises_a_smaller_batch() {
    use ptx_sim::SimOptions;
    use trainer::backend::{CudaBackend, CudaOptions};
    let options = SimOptions { memory_limit: Some(4 << 20), ..SimOptions::default() };
    let sim = Simulator::new().expect("cargo xtask build-ptx has run").with_options(options);
    let setup = CudaOptions { compute: Precision::Bf16.into(), multiprocessors: 1, gpu_name: None };
    let backend = CudaBackend::<Simulator, half::bf16>::new(&sim, setup).unwrap();
    let model = Gpt2::new(&backend, config(), &params(), ModelOptions::default()).unwrap();
    let shape = BatchShape { b: 64, t: T, grad_accum_steps: 1 };
    let err = match Session::new(&backend, model, plain_adamw(), shape) {
        Ok(_) => panic!("a 4 MiB device cannot hold B=64 training state"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("out of GPU memory allocating the "), "{err}");
    assert!(err.contains("MiB free of 4.0 MiB") && err.contains("lower --batch-size"), "{err}");
}

/// Trains three steps and records the simulator's allocation count after each.
struct AllocationsPerStep<'s> {
    sim: &'s Simulator,
    options: ModelOptions,
}

impl BackendJob for AllocationsPerStep<'_> {
    type Output = Vec<u64>;
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<Vec<u64>> {
        let mut session = two_micro_batch_session(backend, self.options)?;
        let mut data = batch(8);
        let mut counts = Vec::new();
        for t in 1..=3 {
            session.train_step(&mut data, 1e-3, t)?;
            counts.push(self.sim.allocation_count());
        }
        Ok(counts)
    }
}

/// Once the first step has run, a training step allocates no device memory (no `cuMemAlloc`
/// in the steady state): on both modules, in every precision, both attention paths.
#[test]
fn training_steps_allocate_nothing_after_the_first() {
    let naive = ModelOptions { attention: AttentionKind::Naive, fuse: true };
    let flash = ModelOptions { attention: AttentionKind::Flash, fuse: true };
    let unfused = ModelOptions { fuse: false, ..naive };
    let runs = [
        (Simulator::new(), Precision::Fp32, unfused),
        (Simulator::new(), Precision::Tf32, naive),
        (Simulator::hopper(), Precision::Bf16, flash),
        (Simulator::hopper(), Precision::Fp16, naive),
    ];
    for (sim, precision, options) in runs {
        let device = ResolvedDevice::Sim(sim.expect("cargo xtask build-ptx has run"));
        let ResolvedDevice::Sim(sim) = &device else { unreachable!("a simulator") };
        let counts = device.run(precision, AllocationsPerStep { sim, options }).unwrap();
        assert!(counts[0] > 0, "the model's arenas and activations are counted");
        assert_eq!(
            counts[0],
            counts[2],
            "{} {options:?}: allocations after steps 1..=3: {counts:?}",
            precision.name()
        );
    }
}

/// One training step of the test model with every op timed.
struct OpTimesJob(ModelOptions);

impl BackendJob for OpTimesJob {
    type Output = OpTimes;
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<OpTimes> {
        let mut session = two_micro_batch_session(backend, self.0)?;
        let mut data = batch(6);
        backend.op_recorder().start();
        session.train_step(&mut data, 1e-3, 1)?;
        backend.op_recorder().take()
    }
}

/// Op times name the same ops, as many times, on the CUDA backend (the simulator, timed by
/// the host clock) as on the CPU backend, fused or not, each matmul by its layer.
#[test]
fn op_times_name_the_same_ops_on_every_backend() {
    for fuse in [true, false] {
        let options = ModelOptions { attention: AttentionKind::Naive, fuse };
        let cpu = ResolvedDevice::Cpu.run(Precision::Fp32, OpTimesJob(options)).unwrap();
        let sim = sim().run(Precision::Fp32, OpTimesJob(options)).unwrap();
        let calls = |times: &OpTimes| -> Vec<(String, usize)> {
            times.ops.iter().map(|o| (o.op.clone(), o.calls)).collect()
        };
        assert_eq!(calls(&sim), calls(&cpu), "fuse {fuse}");
        assert_eq!((sim.clock, cpu.clock), (Some(OpClock::Host), Some(OpClock::Host)));
        assert!(sim.ops.iter().all(|o| o.ms >= 0.0) && sim.total_ms() > 0.0, "{sim:?}");
        let count = |op: &str| calls(&cpu).into_iter().find(|(o, _)| o == op).map(|(_, n)| n);
        // Two layers, two micro-batches, one optimizer step.
        assert_eq!(count("matmul forward qkv"), Some(4));
        // The backward's parts are timed apart: the head has no bias, the others do.
        assert_eq!(count("matmul backward lm head dX"), Some(2));
        assert_eq!(count("matmul backward lm head dW"), Some(2));
        assert_eq!(count("matmul backward lm head dbias"), None);
        // Fused, fc's bias gradient is the fc projection's (from its dX's column sums).
        assert_eq!(count("matmul backward fc dbias"), (!fuse).then_some(4));
        let pre_act_bias = count("matmul backward fc projection pre-activation dbias");
        assert_eq!(pre_act_bias, fuse.then_some(4));
        // Fused, the projections' bias gradients come from the layernorm backwards.
        assert_eq!(count("matmul backward attention projection dbias"), (!fuse).then_some(4));
        assert_eq!(count("matmul backward fc projection dbias"), (!fuse).then_some(4));
        assert_eq!(count("layernorm backward"), Some(10));
        assert_eq!(count("attention backward (materialised)"), Some(4));
        assert_eq!(count("AdamW"), Some(1));
        assert_eq!(count("GELU forward"), (!fuse).then_some(4));
        assert_eq!(count("residual + layernorm forward"), fuse.then_some(8));

        // Both count the same work (f32 activations on both), and the matrix products add up
        // to the model's FLOPs: per token 6 per matmul weight (12·C² per layer and the Vp·C
        // head) plus the causal attention's 6·L·C·T, for two micro-batches.
        let work = |times: &OpTimes| -> Vec<(String, Work)> {
            times.ops.iter().map(|o| (o.op.clone(), o.work)).collect()
        };
        assert_eq!(work(&sim), work(&cpu), "fuse {fuse}");
        let Gpt2Config { num_layers: l, channels: c, padded_vocab_size: vp, .. } = config();
        let weights = 12 * l * c * c + vp * c;
        let per_token = 6 * weights + 6 * l * c * T;
        let flops: f64 = cpu.ops.iter().map(|o| o.work.flops).sum();
        assert_eq!(flops, (2 * B * T * per_token) as f64, "fuse {fuse}");
        let counted = |op: &str| cpu.ops.iter().find(|o| o.op == op).unwrap().work.is_counted();
        assert!(counted("AdamW") && counted("layernorm backward") && !counted("copy to the host"));
    }
}

/// One training step of the test model with every kernel launch timed, and (on the
/// simulator) its launch counts before and after it.
struct KernelTimesJob<'s> {
    sim: Option<&'s Simulator>,
    options: ModelOptions,
}

type LaunchCounts = std::collections::BTreeMap<&'static str, u64>;

impl BackendJob for KernelTimesJob<'_> {
    type Output = (OpTimes, LaunchCounts, LaunchCounts);
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<Self::Output> {
        let mut session = two_micro_batch_session(backend, self.options)?;
        let mut data = batch(6);
        let counts = || self.sim.map(Simulator::launch_counts).unwrap_or_default();
        let before = counts();
        backend.start_kernel_times();
        session.train_step(&mut data, 1e-3, 1)?;
        let times = backend.take_kernel_times()?;
        Ok((times, before, counts()))
    }
}

/// The kernel times of a step list every launch once, under its kernel's name, in the order of
/// first launch, on the simulator's host clock, and the report tables them; the CPU backend
/// has none (and the report no section).
#[test]
fn kernel_times_list_every_launch_of_a_step() {
    let device = sim();
    let ResolvedDevice::Sim(simulator) = &device else { unreachable!("a simulator") };
    let flash = ModelOptions { attention: AttentionKind::Flash, fuse: true };
    let job = KernelTimesJob { sim: Some(simulator), options: flash };
    let (times, before, after) = device.run(Precision::Bf16, job).unwrap();
    let launched: Vec<(&str, u64)> = after
        .iter()
        .map(|(name, n)| (*name, n - before.get(name).copied().unwrap_or(0)))
        .filter(|&(_, n)| n > 0)
        .collect();
    let mut timed: Vec<(&str, u64)> =
        times.ops.iter().map(|k| (k.op.as_str(), k.calls as u64)).collect();
    timed.sort();
    assert_eq!(timed, launched);
    assert_eq!(times.clock, Some(OpClock::Host));
    assert!(times.ops.iter().all(|k| k.ms > 0.0 && !k.work.is_counted()), "{times:?}");
    assert!(times.ops[0].op.starts_with("encoder_forward"), "first launched first: {times:?}");
    let text = trainer::bench::kernel_section(&times, "By kernel");
    assert!(text.contains("| `flash_attention_forward_bf16` |"), "{text}");

    let naive = ModelOptions { attention: AttentionKind::Naive, fuse: true };
    let job = KernelTimesJob { sim: None, options: naive };
    let (cpu, ..) = ResolvedDevice::Cpu.run(Precision::Fp32, job).unwrap();
    assert_eq!(cpu, OpTimes::default());
    assert_eq!(trainer::bench::kernel_section(&cpu, "By kernel"), "");
}

/// One training step of the test model under the simulator's memory-access profile.
struct ProfiledStep<'s> {
    sim: &'s Simulator,
    options: ModelOptions,
}

impl BackendJob for ProfiledStep<'_> {
    type Output = Vec<ptx_sim::profile::KernelProfile>;
    fn run<Bk: Backend>(self, backend: &Bk) -> trainer::Result<Self::Output> {
        let mut session = two_micro_batch_session(backend, self.options)?;
        let mut data = batch(7);
        self.sim.start_memory_profile();
        let stepped = session.train_step(&mut data, 1e-3, 1);
        let kernels = self.sim.take_memory_profile();
        stepped.map(|_| kernels)
    }
}

/// No kernel of a training step has a shared-memory bank conflict, as the simulator's memory
/// profile counts wavefronts (Nsight Compute's way; `ldmatrix` and `cp.async` included): on
/// both modules, in every precision, both attention paths, fused and not, and on every Hopper
/// GEMM tile (`--wgmma-tile tuned` runs each tile that takes a GEMM, stream-K the weight
/// gradients). At C = 128 the layernorm backward's channel sums once took 3.84 wavefronts per
/// ideal one.
#[test]
fn training_steps_have_no_shared_memory_bank_conflicts() {
    let naive = ModelOptions { attention: AttentionKind::Naive, fuse: true };
    let flash = ModelOptions { attention: AttentionKind::Flash, fuse: true };
    let every_tile = Compute {
        wgmma_tile: WgmmaTile::Tuned,
        weight_grads: WeightGrads::StreamK,
        ..Compute::from(Precision::Bf16)
    };
    let runs = [
        (Simulator::new(), Precision::Fp32.into(), ModelOptions { fuse: false, ..naive }),
        (Simulator::new(), Precision::Tf32.into(), naive),
        (Simulator::new(), Precision::Bf16.into(), flash),
        (Simulator::new(), Precision::Fp16.into(), ModelOptions { fuse: false, ..flash }),
        (Simulator::hopper(), Precision::Bf16.into(), flash),
        (Simulator::hopper(), Precision::Tf32.into(), naive),
        (Simulator::hopper(), every_tile, naive),
    ];
    for (sim, compute, options) in runs {
        let device = ResolvedDevice::Sim(sim.expect("cargo xtask build-ptx has run"));
        let ResolvedDevice::Sim(sim) = &device else { unreachable!("a simulator") };
        let kernels: Vec<ptx_sim::profile::KernelProfile> =
            device.run(compute, ProfiledStep { sim, options }).unwrap();
        let arch = gpu_host::Device::ptx_arch(sim);
        let what = format!("{compute:?} {options:?} on {arch:?}");
        assert!(kernels.iter().any(|k| k.kernel.starts_with("layernorm_backward_")), "{what}");
        if compute.wgmma_tile == WgmmaTile::Tuned {
            for tile in ["gemm_wgmma_bf16_", "_n256_", "_pp_", "_de_", "_sk_"] {
                assert!(kernels.iter().any(|k| k.kernel.contains(tile)), "{tile}: {what}");
            }
        }
        let conflicts: Vec<String> = kernels
            .iter()
            .flat_map(|k| k.instrs.iter().map(move |i| (k, i)))
            .filter(|(_, i)| i.stats.wavefronts > i.stats.ideal_wavefronts)
            .map(|(k, i)| {
                let s = &i.stats;
                format!(
                    "{} line {} `{}`: {} of {}",
                    k.kernel, i.line, i.text, s.wavefronts, s.ideal_wavefronts
                )
            })
            .collect();
        assert!(conflicts.is_empty(), "{what}: bank conflicts:\n{}", conflicts.join("\n"));
    }
}
