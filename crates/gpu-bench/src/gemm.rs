//! `cargo xtask bench gemm`: TFLOP/s of the GEMM variants and of cuBLAS / cuBLASLt in the same
//! run, on 4096³ and 8192³, the GPT-2 124M matmuls at B·T = 16384, four of them with the
//! epilogues the trainer fuses into them (against cuBLASLt's fused epilogues) and the materialised
//! attention's batched head products, written to `bench/gemm-<device>.md`. With `--once` it
//! only launches each selected variant once (for a profiler).
//!
//! Method: CUDA events around every launch, warm-up launches first, the median of the timed
//! launches; each problem rotates over enough copies of its operands that the rotation exceeds
//! twice the L2 cache; uniform random data in [-1, 1). cuBLAS is timed through prepared calls
//! (`cublasSgemm`/`cublasGemmEx`, and a `cublasLtMatmul` plan built once), and the faster of the
//! two is the reference for "% of cuBLAS"; per problem and precision the operands are
//! generated once, and the baselines and our variants of that precision are timed in
//! interleaved rounds (each round launches each of them once), so that all meet the same
//! clocks and temperature (`Timer::interleaved_medians_ms`). A
//! sampled-rows comparison of our output against cuBLAS's guards the numbers against a kernel
//! that is fast because it is wrong.
//!
//! Needs a CUDA GPU: without one it fails with a one-line message. `cargo xtask bench gemm`
//! builds the PTX first and then this binary, so the kernels measured are the current ones.

use crate::cublas::{self, Api, Blas, LtEpilogue, LtPlan, Mode};
use crate::data::{Value, random};
use crate::report::{self, Row};
use crate::timing::{RunArgs, Timer};
use anyhow::{Context, Result};
use gpu_host::kernels::elementwise::{FloatElement, fill};
use gpu_host::kernels::gemm::{
    Activation, Epilogue, GemmEngine, GemmOutput, GemmSpec, GemmTypes, Layout, Precision,
    WgmmaTile, bias_grad_from_col_sums, col_sum_groups, col_sums_len, gemm_split_k,
};
use gpu_host::{Device, DeviceBuffer, DeviceElement, DeviceViewMut, Gpu};
use half::{bf16, f16};

/// Options of `bench gemm`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Timing and report options.
    #[command(flatten)]
    pub run: RunArgs,
    /// Only problems whose name contains this (e.g. `fc`, `4096`).
    #[arg(long)]
    pub only: Option<String>,
    /// Only our variant with exactly this label (e.g. `BF16 wgmma`: the tile `Auto` picks;
    /// `FP32 SIMT`).
    #[arg(long)]
    pub variant: Option<String>,
    /// Launch each selected variant of each selected problem once, untimed, without the cuBLAS
    /// baselines and without a report: one launch per variant for a profiler (`ncu`, the GPU
    /// bundle's `profile` stage).
    #[arg(long)]
    pub once: bool,
}

/// One benchmarked GEMM.
#[derive(Clone, Debug)]
pub struct Problem {
    /// Name in the report.
    pub name: String,
    /// Shape, layouts, leading dimensions and beta (the precision is set per variant).
    pub spec: GemmSpec,
    /// The epilogue fused after the product, if any.
    pub fused: Option<Fused>,
}

/// An epilogue the trainer fuses into a GEMM, timed with it against cuBLASLt's fused
/// epilogue of the same work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fused {
    /// `C = v + bias`: the qkv and attention projection forwards (cuBLASLt `BIAS`).
    Bias,
    /// `C = gelu(v + bias)`, storing the pre-activation `v + bias`: the fc layer's forward
    /// (cuBLASLt `GELU_AUX_BIAS`).
    BiasGelu,
    /// `C = v · gelu'(pre_act)`, and the bias gradient `Σ_rows C` from the epilogue's column
    /// sums and `bias_grad_from_col_sums` (both timed): the fc projection's input gradient and
    /// the fc bias gradient (cuBLASLt `DGELU_BGRAD`).
    DGeluBiasGrad,
}

impl Fused {
    /// cuBLASLt's fused epilogue of the same work.
    fn lt(self) -> LtEpilogue {
        match self {
            Fused::Bias => LtEpilogue::Bias,
            Fused::BiasGelu => LtEpilogue::GeluAuxBias,
            Fused::DGeluBiasGrad => LtEpilogue::DGeluBgrad,
        }
    }
}

/// Tokens per batch of the GPT-2 shapes (B·T).
pub const TOKENS: usize = 16384;

/// GPT-2 124M linear layers: (name, out features, in features).
pub const GPT2_LAYERS: [(&str, usize, usize); 5] = [
    ("qkv", 2304, 768),
    ("attproj", 768, 768),
    ("fc", 3072, 768),
    ("fcproj", 768, 3072),
    ("classifier", 50304, 768),
];

/// The bias-only forwards with their fused bias ([`Fused::Bias`]), both with K = 768: qkv's
/// and the attention projection's.
pub const BIAS_FWD_FUSED: [&str; 2] = ["qkv fwd + bias", "attproj fwd + bias"];
/// The fc layer's forward with its fused bias and GELU ([`Fused::BiasGelu`]).
pub const FC_FWD_FUSED: &str = "fc fwd + bias, GELU";
/// The fc projection's input gradient with the fused GELU backward and fc bias gradient
/// ([`Fused::DGeluBiasGrad`]).
pub const FCPROJ_DX_FUSED: &str = "fcproj dX + dGELU, dbias";

/// The materialised attention's batch of heads (B·NH = 16 · 12), sequence and head size.
pub const ATTENTION: (usize, usize, usize) = (192, 1024, 64);

/// 4096³ (row-major A·B), 4096³ and 8192³ with K-major operands (A row-major, B
/// column-major: the layout every Hopper entry takes), then per GPT-2 layer its forward
/// `X·Wᵀ`, input gradient `dY·W` and weight gradient `dW += dYᵀ·X`, then the materialised
/// attention's three kinds of per-head products, batched over the heads, in full (the trainer
/// runs them in causal blocks): the scores `Q·Kᵀ` (also `dP = dO·Vᵀ`), `P·V` (also
/// `dQ = dS·K`) and `dV = Pᵀ·dO` (also `dK = dSᵀ·Q`), the last two 64 columns wide; last,
/// the qkv, attention projection and fc forwards and the fc projection's input gradient with
/// the epilogues the trainer fuses into them ([`Fused`]).
pub fn problems() -> Vec<Problem> {
    let p = Precision::Fp32;
    let mut out = vec![Problem {
        name: "square".into(),
        spec: GemmSpec::new(4096, 4096, 4096, Layout::RowMajor, Layout::RowMajor, p),
        fused: None,
    }];
    for size in [4096, 8192] {
        out.push(Problem {
            name: format!("square {size} K-major"),
            spec: GemmSpec::new(size, size, size, Layout::RowMajor, Layout::ColMajor, p),
            fused: None,
        });
    }
    for (layer, out_f, in_f) in GPT2_LAYERS {
        for (pass, spec) in [
            ("fwd", GemmSpec::linear_forward(TOKENS, out_f, in_f, p)),
            ("dX", GemmSpec::linear_backward_input(TOKENS, in_f, out_f, p)),
            ("dW", GemmSpec::linear_backward_weight(TOKENS, in_f, out_f, p)),
        ] {
            out.push(Problem { name: format!("{layer} {pass}"), spec, fused: None });
        }
    }
    let (heads, t, hd) = ATTENTION;
    let (r, c) = (Layout::RowMajor, Layout::ColMajor);
    for (name, (m, n, k), layouts) in [
        ("attention QKᵀ", (t, t, hd), (r, c)),
        ("attention PV", (t, hd, t), (r, r)),
        ("attention dV", (t, hd, t), (c, r)),
    ] {
        let mut spec = GemmSpec::new(m, n, k, layouts.0, layouts.1, p);
        (spec.batch, spec.stride_a, spec.stride_b, spec.stride_c) =
            (heads, spec.a_len(), spec.b_len(), spec.c_len());
        out.push(Problem { name: name.into(), spec, fused: None });
    }
    // Last: new on hardware, so that a fault there (which would end the process's CUDA
    // context) costs no other row.
    for (name, (out_features, in_features)) in
        BIAS_FWD_FUSED.into_iter().zip([(2304, 768), (768, 768)])
    {
        out.push(Problem {
            name: name.into(),
            spec: GemmSpec::linear_forward(TOKENS, out_features, in_features, p),
            fused: Some(Fused::Bias),
        });
    }
    out.push(Problem {
        name: FC_FWD_FUSED.into(),
        spec: GemmSpec::linear_forward(TOKENS, 3072, 768, p),
        fused: Some(Fused::BiasGelu),
    });
    out.push(Problem {
        name: FCPROJ_DX_FUSED.into(),
        spec: GemmSpec::linear_backward_input(TOKENS, 3072, 768, p),
        fused: Some(Fused::DGeluBiasGrad),
    });
    out
}

/// One benchmarked variant: our precision, engine and Hopper tile, its cuBLAS mode, a label.
type Variant = (Precision, GemmEngine, WgmmaTile, Mode, &'static str);

/// The label of the variant that runs the BF16 wgmma plan without the tail split (every tile
/// split over K, or none), on the problems where `with_split_k_for` picks a tail split.
const EVERY_TILE_SPLIT: &str = "BF16 wgmma, every tile split";

/// The benchmarked variants. The wgmma rows appear on Hopper, for the problems that kernel
/// takes (BF16/FP16: every layout; TF32: K-major operands, i.e. the forward GEMMs): with the
/// tile `Auto` picks (what the trainer runs), and for BF16 also each tile forced (ping-pong and
/// deferred only where they have entries: A row-major; stream-K where it has entries, `rc` and
/// `cr`, planned by `with_split_k_for` as the trainer plans its weight gradients), to check that
/// choice, and the split plan without the tail split ([`EVERY_TILE_SPLIT`]), to check that one.
const VARIANTS: [Variant; 13] = [
    (Precision::Fp32, GemmEngine::MmaSync, WgmmaTile::Auto, Mode::Fp32, "FP32 SIMT"),
    (Precision::Tf32, GemmEngine::MmaSync, WgmmaTile::Auto, Mode::Tf32, "TF32 mma.sync"),
    (Precision::Tf32, GemmEngine::Wgmma, WgmmaTile::Auto, Mode::Tf32, "TF32 wgmma"),
    (Precision::Bf16, GemmEngine::MmaSync, WgmmaTile::Auto, Mode::Bf16, "BF16 mma.sync"),
    (Precision::Bf16, GemmEngine::Wgmma, WgmmaTile::Auto, Mode::Bf16, "BF16 wgmma"),
    (Precision::Bf16, GemmEngine::Wgmma, WgmmaTile::N128, Mode::Bf16, "BF16 wgmma 128×128"),
    (Precision::Bf16, GemmEngine::Wgmma, WgmmaTile::N256, Mode::Bf16, "BF16 wgmma 128×256"),
    (Precision::Bf16, GemmEngine::Wgmma, WgmmaTile::PingPong, Mode::Bf16, "BF16 wgmma ping-pong"),
    (Precision::Bf16, GemmEngine::Wgmma, WgmmaTile::Deferred, Mode::Bf16, "BF16 wgmma deferred"),
    (Precision::Bf16, GemmEngine::Wgmma, WgmmaTile::StreamK, Mode::Bf16, "BF16 wgmma stream-K"),
    (Precision::Bf16, GemmEngine::Wgmma, WgmmaTile::N128, Mode::Bf16, EVERY_TILE_SPLIT),
    (Precision::Fp16, GemmEngine::MmaSync, WgmmaTile::Auto, Mode::Fp16, "FP16 mma.sync"),
    (Precision::Fp16, GemmEngine::Wgmma, WgmmaTile::Auto, Mode::Fp16, "FP16 wgmma"),
];

/// The cuBLAS modes, in report order: each problem's variants of one mode share its operands
/// and its cuBLAS / cuBLASLt timings.
const MODES: [Mode; 4] = [Mode::Fp32, Mode::Tf32, Mode::Bf16, Mode::Fp16];

/// Runs the benchmark (see the module docs).
pub fn run(args: &Args) -> Result<()> {
    let (gpu, l2_bytes) = args.run.start("gemm")?;
    let cublas_version = cublas::version()?;
    let info = gpu.info().clone();
    let meta = args.run.meta(&gpu, l2_bytes);
    let bench = Bench::new(&gpu, args, l2_bytes)?;
    let mut rows = Vec::new();
    let mut launched = 0;
    for problem in problems() {
        if args.only.as_ref().is_some_and(|s| !problem.name.contains(s.as_str())) {
            continue;
        }
        for mode in MODES {
            // The fused epilogues' column sums are the tensor-core kernels' (the trainer's
            // fp32 rung adds up the bias gradient apart).
            if problem.fused.is_some() && mode == Mode::Fp32 {
                continue;
            }
            let mut variants = Vec::new();
            let selected = |v: &&Variant| {
                v.3 == mode && args.variant.as_ref().is_none_or(|label| label == v.4)
            };
            for (precision, engine, wgmma_tile, _, label) in VARIANTS.iter().filter(selected) {
                // A fused problem runs the tile `Auto` picks (what the trainer runs) and each
                // tile forced: where the epilogue is heavy (GELU, its backward), which schedule
                // hides it best is what the row is for. Never split: the trainer splits none.
                if problem.fused.is_some() && *label == EVERY_TILE_SPLIT {
                    continue;
                }
                let mut spec = problem.spec;
                (spec.precision, spec.engine, spec.wgmma_tile) = (*precision, *engine, *wgmma_tile);
                let (sms, arch) = (info.multiprocessors as usize, gpu.ptx_arch());
                let planned = spec.with_split_k_for(sms, arch);
                let spec = if *label == EVERY_TILE_SPLIT {
                    if planned.whole_tiles == 0 {
                        continue;
                    }
                    spec.with_every_tile_split_for(sms, arch)
                } else {
                    planned
                };
                // Stream-K where its plan did not apply fell back to `Auto`'s: not its row.
                let forced_missing = *wgmma_tile != WgmmaTile::Auto
                    && (!spec.has_wgmma_entry(*wgmma_tile) || spec.wgmma_tile != *wgmma_tile);
                // Fresh allocations are 256-byte aligned: address 0 stands for them.
                if spec.engine_on(&gpu, 0, 0).is_ok() && !forced_missing {
                    variants.push((spec, *label));
                }
            }
            if variants.is_empty() {
                continue;
            }
            if args.once {
                let fused = problem.fused;
                match mode {
                    Mode::Fp32 | Mode::Tf32 => bench.launch_once::<f32>(&variants, fused),
                    Mode::Bf16 => bench.launch_once::<bf16>(&variants, fused),
                    Mode::Fp16 => bench.launch_once::<f16>(&variants, fused),
                }
                .with_context(|| format!("{} ({mode:?})", problem.name))?;
                for (_, label) in &variants {
                    println!("launched once: {} {label}", problem.name);
                }
                launched += variants.len();
                continue;
            }
            let measured = match mode {
                Mode::Fp32 | Mode::Tf32 => bench.measure::<f32>(&problem, mode, &variants),
                Mode::Bf16 => bench.measure::<bf16>(&problem, mode, &variants),
                Mode::Fp16 => bench.measure::<f16>(&problem, mode, &variants),
            }
            .with_context(|| format!("{} ({mode:?})", problem.name));
            // The fused problems are new on hardware: one that fails is reported and skipped,
            // not allowed to cost the report of the others.
            let measured = match measured {
                Err(e) if problem.fused.is_some() => {
                    eprintln!("bench gemm: skipped: {e:#}");
                    continue;
                }
                other => other?,
            };
            for row in measured {
                println!("{}", report::progress_line(&row));
                rows.push(row);
            }
        }
    }
    if args.once {
        println!("headline: {launched} GEMM variants launched once (no timing, no report)");
        return Ok(());
    }
    let text = report::markdown(&meta, &cublas_version, &rows);
    let path = args.run.report_path("gemm", &info.name);
    crate::write_atomic(&path, &text)?;
    println!("\n{text}\nbench gemm: wrote {}", path.display());
    println!("headline: {}", report::headline(&rows));
    Ok(())
}

/// Element types the benchmark fills with random values and compares in f64.
trait Sample: Value + DeviceElement + FloatElement + GemmOutput + GemmTypes<Self> {
    fn to_f64(self) -> f64;
}

impl Sample for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Sample for bf16 {
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
}

impl Sample for f16 {
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
}

/// Device, baselines and timing settings shared by every measurement.
struct Bench<'a> {
    gpu: &'a Gpu,
    blas: Blas,
    workspace: <Gpu as Device>::Buffer<u8>,
    l2_bytes: usize,
    timer: Timer<'a>,
}

/// Operands of one problem, several copies to rotate over: A, B, C and the auxiliary matrix
/// of a fused epilogue (the pre-activation, C's shape; one element when unfused).
struct Operands<T: DeviceElement> {
    sets: Vec<[<Gpu as Device>::Buffer<T>; 4]>,
}

/// The vectors of a fused epilogue: the bias (read by ours and by `GELU_AUX_BIAS`), cuBLASLt's
/// bias gradient (`DGELU_BGRAD`), our column sums and our bias gradient.
struct Vectors<T: DeviceElement> {
    bias: <Gpu as Device>::Buffer<T>,
    lt_dbias: <Gpu as Device>::Buffer<T>,
    col_sums: <Gpu as Device>::Buffer<f32>,
    dbias: <Gpu as Device>::Buffer<f32>,
}

impl<T: DeviceElement> Vectors<T> {
    /// The address of the bias vector cuBLASLt's epilogue for `fused` reads (`GELU_AUX_BIAS`)
    /// or writes (`DGELU_BGRAD`).
    fn lt_bias(&self, fused: Fused) -> u64 {
        match fused {
            Fused::Bias | Fused::BiasGelu => self.bias.view().addr(),
            Fused::DGeluBiasGrad => self.lt_dbias.view().addr(),
        }
    }
}

/// The cuBLASLt plan of a problem, fused or not (none where its heuristic had none).
struct Lt {
    plan: LtPlan,
    fused: Option<Fused>,
}

impl<'a> Bench<'a> {
    fn new(gpu: &'a Gpu, args: &Args, l2_bytes: usize) -> Result<Self> {
        let blas = Blas::new(gpu.stream().cu_stream().cast())?;
        let workspace = gpu.alloc::<u8>(WORKSPACE_BYTES)?;
        let timer = args.run.timer(gpu);
        Ok(Self { gpu, blas, workspace, l2_bytes, timer })
    }

    /// Copies of A, B, C (and, fused, the auxiliary matrix) so that one rotation touches at
    /// least twice the L2 size.
    fn operands<T: Sample>(&self, spec: &GemmSpec, fused: Option<Fused>) -> Result<Operands<T>> {
        let aux_len = if fused.is_some_and(|f| f.lt().uses_aux()) { spec.c_len() } else { 1 };
        let set_bytes = (spec.a_len() + spec.b_len() + spec.c_len() + aux_len) * size_of::<T>();
        let count = (2 * self.l2_bytes).div_ceil(set_bytes.max(1)).clamp(1, 16);
        let mut sets = Vec::with_capacity(count);
        for i in 0..count as u64 {
            let a = self.gpu.upload(&random::<T>(spec.a_len(), 4 * i + 1))?;
            let b = self.gpu.upload(&random::<T>(spec.b_len(), 4 * i + 2))?;
            let c = self.gpu.upload(&random::<T>(spec.c_len(), 4 * i + 3))?;
            let aux = self.gpu.upload(&random::<T>(aux_len, 4 * i + 4))?;
            sets.push([a, b, c, aux]);
        }
        Ok(Operands { sets })
    }

    /// The vectors of a fused epilogue of `spec` (random bias).
    fn vectors<T: Sample>(&self, spec: &GemmSpec) -> Result<Vectors<T>> {
        Ok(Vectors {
            bias: self.gpu.upload(&random::<T>(spec.n, 99))?,
            lt_dbias: self.gpu.alloc::<T>(spec.n)?,
            col_sums: self.gpu.alloc::<f32>(col_sums_len(spec.batch, spec.m, spec.n))?,
            dbias: self.gpu.alloc::<f32>(spec.n)?,
        })
    }

    /// Our GEMM of `spec` into `c`, with the fused epilogue's work when `fused` (whose
    /// auxiliary matrix is `aux` and vectors `vectors`).
    fn launch_ours<T: Sample>(
        &self,
        spec: &GemmSpec,
        (a, b, c): (&<Gpu as Device>::Buffer<T>, &<Gpu as Device>::Buffer<T>, DeviceViewMut<'_, T>),
        fused: Option<Fused>,
        aux: &mut <Gpu as Device>::Buffer<T>,
        vectors: Option<&mut Vectors<T>>,
        workspace: &mut <Gpu as Device>::Buffer<f32>,
    ) -> Result<()> {
        let (av, bv, w) = (a.view(), b.view(), workspace.view_mut());
        match (fused, vectors) {
            (None, _) => gemm_split_k(self.gpu, spec, av, bv, c, Epilogue::default(), w)?,
            (Some(Fused::Bias), Some(v)) => {
                let epilogue = Epilogue { bias: Some(v.bias.view()), ..Epilogue::default() };
                gemm_split_k(self.gpu, spec, av, bv, c, epilogue, w)?;
            }
            (Some(Fused::BiasGelu), Some(v)) => {
                let epilogue = Epilogue {
                    bias: Some(v.bias.view()),
                    activation: Activation::Gelu { pre_act: Some(aux.view_mut()) },
                    col_sums: None,
                };
                gemm_split_k(self.gpu, spec, av, bv, c, epilogue, w)?;
            }
            (Some(Fused::DGeluBiasGrad), Some(v)) => {
                let epilogue = Epilogue {
                    bias: None,
                    activation: Activation::DGelu { pre_act: aux.view() },
                    col_sums: Some(v.col_sums.view_mut()),
                };
                gemm_split_k(self.gpu, spec, av, bv, c, epilogue, w)?;
                let groups = col_sum_groups(spec.batch, spec.m);
                bias_grad_from_col_sums(
                    self.gpu,
                    v.col_sums.view(),
                    groups,
                    v.dbias.view_mut(),
                    0.0,
                )?;
            }
            (Some(_), None) => anyhow::bail!("a fused problem without its vectors"),
        }
        Ok(())
    }

    /// cuBLASLt's launch of `lt` on set `[a, b, c, aux]` (its output into `c`).
    ///
    /// # Safety
    /// The buffers hold the problem's matrices, `vectors` its vectors when `lt` is fused.
    unsafe fn launch_lt<T: Sample>(
        &self,
        lt: &Lt,
        (a, b, c, aux): (u64, u64, u64, u64),
        vectors: Option<&Vectors<T>>,
    ) -> Result<()> {
        let stream = self.gpu.stream().cu_stream().cast();
        // SAFETY: the caller's contract.
        unsafe {
            match (lt.fused, vectors) {
                (None, _) => lt.plan.run(a, b, c, stream),
                (Some(fused), Some(v)) => {
                    lt.plan.run_fused((a, b, c), (aux, v.lt_bias(fused)), stream)
                }
                (Some(_), None) => anyhow::bail!("a fused plan without its vectors"),
            }
        }
    }

    /// Launches each of `variants` (specs of one shape and layouts) once on one set of random
    /// operands, and waits for them.
    fn launch_once<T: Sample>(
        &self,
        variants: &[(GemmSpec, &str)],
        fused: Option<Fused>,
    ) -> Result<()> {
        let spec = &variants[0].0;
        let mut ops = self.operands::<T>(spec, fused)?;
        let mut vectors = fused.map(|_| self.vectors::<T>(spec)).transpose()?;
        let workspace_len = variants.iter().map(|(s, _)| s.workspace_len()).max().unwrap_or(0);
        let mut workspace = self.gpu.alloc::<f32>(workspace_len.max(1))?;
        let [a, b, c, aux] = &mut ops.sets[0];
        for (spec, _) in variants {
            let abc = (&*a, &*b, c.view_mut());
            self.launch_ours(spec, abc, fused, aux, vectors.as_mut(), &mut workspace)?;
        }
        Ok(self.gpu.synchronize()?)
    }

    /// One row per variant of `problem` in `mode` (specs of the same shape and layouts that
    /// differ in engine, tile or split): the operands are generated and cuBLAS / cuBLASLt
    /// timed once, then each of ours is timed and compared with the faster baseline's output.
    /// A fused problem's baseline is cuBLASLt's fused epilogue (cuBLAS's bare GEMM is timed
    /// for scale); without a cuBLASLt plan for it, the bare GEMM, and no comparison.
    fn measure<T: Sample>(
        &self,
        problem: &Problem,
        mode: Mode,
        variants: &[(GemmSpec, &str)],
    ) -> Result<Vec<Row>> {
        let (spec, fused) = (&variants[0].0, problem.fused);
        let mut ops = self.operands::<T>(spec, fused)?;
        let mut vectors = fused.map(|_| self.vectors::<T>(spec)).transpose()?;
        let n_sets = ops.sets.len();
        let workspace_len = variants.iter().map(|(s, _)| s.workspace_len()).max().unwrap_or(0);
        let mut workspace = self.gpu.alloc::<f32>(workspace_len.max(1))?;
        // A problem cuBLASLt's heuristic has no plan for keeps cuBLAS as its baseline.
        let ws = (self.workspace.view().addr(), WORKSPACE_BYTES);
        let plan = match (fused, &vectors) {
            (Some(f), Some(v)) => {
                let aux = ops.sets[0][3].view().addr();
                LtPlan::fused(mode, spec, (f.lt(), aux, v.lt_bias(f)), ws.0, ws.1)
            }
            _ => LtPlan::new(mode, spec, ws.0, ws.1),
        };
        let lt = plan
            .inspect_err(|e| {
                let what = fused.map_or("", |f| f.lt().name());
                eprintln!(
                    "bench gemm: {} ({mode:?}): no cuBLASLt {what} plan ({e:#}); cuBLAS alone",
                    problem.name
                )
            })
            .ok()
            .map(|plan| Lt { plan, fused });
        let addrs = |ops: &Operands<T>, set: usize| {
            let [a, b, c, aux] = &ops.sets[set];
            (a.view().addr(), b.view().addr(), c.view().addr(), aux.view().addr())
        };
        // cuBLAS, cuBLASLt (when planned), then each of ours, timed in interleaved rounds.
        let first_ours = 1 + usize::from(lt.is_some());
        let ms =
            self.timer.interleaved_medians_ms(n_sets, first_ours + variants.len(), |k, set| {
                match (k, &lt) {
                    (0, _) => {
                        let (a, b, c, _) = addrs(&ops, set);
                        // SAFETY: the buffers hold the problem's matrices in T.
                        unsafe { self.blas.run(mode, spec, a, b, c) }
                    }
                    (1, Some(lt)) => {
                        // SAFETY: as above; the vectors are the problem's.
                        unsafe { self.launch_lt(lt, addrs(&ops, set), vectors.as_ref()) }
                    }
                    _ => {
                        let [a, b, c, aux] = &mut ops.sets[set];
                        let abc = (&*a, &*b, c.view_mut());
                        let spec = &variants[k - first_ours].0;
                        self.launch_ours(spec, abc, fused, aux, vectors.as_mut(), &mut workspace)
                    }
                }
            })?;
        let (blas_ms, lt_ms) = (ms[0], lt.as_ref().map(|_| ms[1]));
        let (best_api, best_ms) = match lt_ms {
            Some(lt_ms) if lt_ms < blas_ms || fused.is_some() => (Api::Lt, lt_ms),
            _ => (Api::Blas, blas_ms),
        };
        let comparable = fused.is_none() || best_api == Api::Lt;
        let reference = match comparable {
            true => Some(self.reference_rows::<T>(spec, &ops, mode, best_api, (&lt, &vectors))?),
            false => None,
        };
        let tflops = |spec: &GemmSpec, ms: f64| spec.flops() / (ms * 1e-3) / 1e12;
        let mut rows = Vec::with_capacity(variants.len());
        for ((spec, label), &ours_ms) in variants.iter().zip(&ms[first_ours..]) {
            let rel_diff = match &reference {
                Some(reference) => {
                    let inputs = (&mut ops, vectors.as_mut(), &mut workspace);
                    self.compare::<T>(spec, fused, inputs, reference)?
                }
                None => f64::NAN,
            };
            rows.push(Row {
                problem: problem.name.clone(),
                spec: *spec,
                variant: label.to_string(),
                ours: tflops(spec, ours_ms),
                blas: (Api::Blas.name(mode), tflops(spec, blas_ms)),
                lt: lt_ms.map(|ms| tflops(spec, ms)),
                best: (best_api.name(mode), tflops(spec, best_ms)),
                rel_diff,
            });
        }
        Ok(rows)
    }

    /// The rows [`Bench::compare`] samples (8, evenly spread), of `api`'s product of the
    /// first operand set into C = 0 (`lt`: the cuBLASLt plan, fused or not, where `api` is
    /// cuBLASLt).
    fn reference_rows<T: Sample>(
        &self,
        spec: &GemmSpec,
        ops: &Operands<T>,
        mode: Mode,
        api: Api,
        (lt, vectors): (&Option<Lt>, &Option<Vectors<T>>),
    ) -> Result<Vec<Vec<T>>> {
        let [a, b, _, aux] = &ops.sets[0];
        let mut reference = self.gpu.alloc::<T>(spec.c_len())?;
        fill(self.gpu, reference.view_mut(), T::from_f32(0.0))?;
        let (a, b, r) = (a.view().addr(), b.view().addr(), reference.view().addr());
        // SAFETY: the buffers hold the problem's matrices in T, the vectors its vectors.
        unsafe {
            match (api, lt) {
                (Api::Lt, Some(lt)) => {
                    self.launch_lt(lt, (a, b, r, aux.view().addr()), vectors.as_ref())?
                }
                _ => self.blas.run(mode, spec, a, b, r)?,
            }
        }
        sampled_rows(spec)
            .map(|range| Ok(self.gpu.download(reference.view().slice(range)?)?))
            .collect()
    }

    /// max |ours − cuBLAS| / max |cuBLAS| over the sampled rows, both computed from C = 0 on
    /// the first operand set.
    fn compare<T: Sample>(
        &self,
        spec: &GemmSpec,
        fused: Option<Fused>,
        (ops, vectors, workspace): (
            &mut Operands<T>,
            Option<&mut Vectors<T>>,
            &mut <Gpu as Device>::Buffer<f32>,
        ),
        reference: &[Vec<T>],
    ) -> Result<f64> {
        let [a, b, _, aux] = &mut ops.sets[0];
        let mut ours = self.gpu.alloc::<T>(spec.c_len())?;
        fill(self.gpu, ours.view_mut(), T::from_f32(0.0))?;
        self.launch_ours(spec, (&*a, &*b, ours.view_mut()), fused, aux, vectors, workspace)?;
        let (mut max_diff, mut max_ref) = (0.0f64, 0.0f64);
        for (range, want) in sampled_rows(spec).zip(reference) {
            let got = self.gpu.download(ours.view().slice(range)?)?;
            for (g, w) in got.into_iter().zip(want) {
                max_diff = max_diff.max((g.to_f64() - w.to_f64()).abs());
                max_ref = max_ref.max(w.to_f64().abs());
            }
        }
        Ok(if max_ref > 0.0 { max_diff / max_ref } else { max_diff })
    }
}

/// The element ranges of C's 8 sampled rows (evenly spread over the batches' M rows).
fn sampled_rows(spec: &GemmSpec) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    (0..8).map(|i| {
        let row = i * (spec.batch * spec.m - 1) / 7;
        let start = row / spec.m * spec.stride_c + row % spec.m * spec.ldc;
        start..start + spec.n
    })
}

/// cuBLASLt workspace (NVIDIA's recommendation for Hopper).
const WORKSPACE_BYTES: usize = 32 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_cover_the_gpt2_matmuls() {
        let all = problems();
        assert_eq!(all.len(), 3 + 3 * GPT2_LAYERS.len() + 3 + 4);
        let fwd = all.iter().find(|p| p.name == "classifier fwd").unwrap();
        assert_eq!((fwd.spec.m, fwd.spec.n, fwd.spec.k), (TOKENS, 50304, 768));
        let dw = all.iter().find(|p| p.name == "fcproj dW").unwrap();
        assert_eq!((dw.spec.m, dw.spec.n, dw.spec.k, dw.spec.beta), (768, 3072, TOKENS, 1.0));
        assert_eq!(dw.spec.a_layout, Layout::ColMajor);
        let dx = all.iter().find(|p| p.name == "qkv dX").unwrap();
        assert_eq!((dx.spec.m, dx.spec.n, dx.spec.k), (TOKENS, 768, 2304));
        // With the trainer's fused epilogues: qkv's, the attention projection's and fc's
        // forwards, the fc projection's dX.
        let fc = all.iter().find(|p| p.name == FC_FWD_FUSED).unwrap();
        assert_eq!(
            (fc.spec.m, fc.spec.n, fc.spec.k, fc.fused),
            (TOKENS, 3072, 768, Some(Fused::BiasGelu))
        );
        assert_eq!((fc.spec.a_layout, fc.spec.b_layout), (Layout::RowMajor, Layout::ColMajor));
        let dx = all.iter().find(|p| p.name == FCPROJ_DX_FUSED).unwrap();
        let dgelu = Some(Fused::DGeluBiasGrad);
        assert_eq!((dx.spec.m, dx.spec.n, dx.spec.k, dx.fused), (TOKENS, 3072, 768, dgelu));
        assert_eq!((dx.spec.a_layout, dx.spec.b_layout), (Layout::RowMajor, Layout::RowMajor));
        for (name, n) in BIAS_FWD_FUSED.into_iter().zip([2304, 768]) {
            let fwd = all.iter().find(|p| p.name == name).unwrap();
            assert_eq!(
                (fwd.spec.m, fwd.spec.n, fwd.spec.k, fwd.fused),
                (TOKENS, n, 768, Some(Fused::Bias))
            );
            assert_eq!(
                (fwd.spec.a_layout, fwd.spec.b_layout),
                (Layout::RowMajor, Layout::ColMajor)
            );
        }
        assert_eq!(all.iter().filter(|p| p.fused.is_some()).count(), 4);
        // One GPT-2 layer's three matmuls of qkv: 3 × 2·16384·768·2304 flops.
        let qkv = all.iter().filter(|p| p.name.starts_with("qkv") && p.fused.is_none());
        let qkv: f64 = qkv.map(|p| p.spec.flops()).sum();
        assert_eq!(qkv, 3.0 * 2.0 * 16384.0 * 768.0 * 2304.0);
    }

    #[test]
    fn attention_problems_batch_the_heads_and_sample_every_part_of_c() {
        let all = problems();
        let pv = &all.iter().find(|p| p.name == "attention PV").unwrap().spec;
        assert_eq!((pv.batch, pv.m, pv.n, pv.k, pv.stride_c), (192, 1024, 64, 1024, 1024 * 64));
        assert_eq!(pv.flops(), 2.0 * 192.0 * 1024.0 * 64.0 * 1024.0);
        let rows: Vec<_> = sampled_rows(pv).collect();
        assert_eq!(rows[0], 0..64);
        assert_eq!(rows[7].end, pv.c_len(), "the last row of the last batch");
        let dw = &all.iter().find(|p| p.name == "fc dW").unwrap().spec;
        assert_eq!(sampled_rows(dw).last().unwrap().end, dw.c_len());
    }

    #[test]
    fn random_values_are_nonzero_and_in_range() {
        let v = random::<f32>(10_000, 7);
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(v.iter().filter(|x| **x == 0.0).count() < 5);
        assert!(v.windows(2).any(|w| w[0] != w[1]));
    }
}
