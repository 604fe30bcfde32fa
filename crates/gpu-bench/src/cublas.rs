//! The cuBLAS baselines: `cublasSgemm`, `cublasGemmEx` (their strided-batched forms for
//! batched problems) and a `cublasLtMatmul` plan prepared once (descriptors, layouts and the heuristic's algorithm), so the timed loop issues only the
//! matmul itself.
//!
//! cuBLAS is column-major. Our row-major `C (M×N) = A · B` is the column-major
//! `Cᵀ (N×M) = Bᵀ · Aᵀ`: the first cuBLAS operand is B (transposed when B is column-major in
//! our terms), the second is A (transposed when A is column-major), with m = N and n = M.

use anyhow::{Context, Result, bail};
use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::cublaslt::{result as lt, sys as lt_sys};
use gpu_host::kernels::gemm::GemmSpec;
use gpu_host::kernels::gemm::Layout;
use std::ffi::c_void;

/// Element types and compute mode of one baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// f32 in and out, FP32 FMA.
    Fp32,
    /// f32 in and out, TF32 tensor cores (`CUBLAS_COMPUTE_32F_FAST_TF32`).
    Tf32,
    /// bf16 in and out, f32 accumulation.
    Bf16,
    /// f16 in and out, f32 accumulation.
    Fp16,
}

/// Which cuBLAS entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `cublasSgemm` (Fp32) or `cublasGemmEx` (the others).
    Blas,
    /// `cublasLtMatmul`.
    Lt,
}

impl Api {
    /// Name for the report.
    pub fn name(self, mode: Mode) -> &'static str {
        match (self, mode) {
            (Api::Blas, Mode::Fp32) => "cublasSgemm",
            (Api::Blas, _) => "cublasGemmEx",
            (Api::Lt, _) => "cublasLt",
        }
    }
}

fn blas_type(mode: Mode) -> blas_sys::cudaDataType_t {
    match mode {
        Mode::Fp32 | Mode::Tf32 => blas_sys::cudaDataType_t::CUDA_R_32F,
        Mode::Bf16 => blas_sys::cudaDataType_t::CUDA_R_16BF,
        Mode::Fp16 => blas_sys::cudaDataType_t::CUDA_R_16F,
    }
}

fn lt_type(mode: Mode) -> lt_sys::cudaDataType_t {
    match mode {
        Mode::Fp32 | Mode::Tf32 => lt_sys::cudaDataType_t::CUDA_R_32F,
        Mode::Bf16 => lt_sys::cudaDataType_t::CUDA_R_16BF,
        Mode::Fp16 => lt_sys::cudaDataType_t::CUDA_R_16F,
    }
}

/// (transpose first operand, transpose second operand) in cuBLAS terms.
fn transposes(p: &GemmSpec) -> (bool, bool) {
    (p.b_layout == Layout::ColMajor, p.a_layout == Layout::ColMajor)
}

/// The version of the cuBLAS that was loaded (`cublasLtGetVersion`, e.g. `13.0.2`); fails
/// unless the cuBLAS and cuBLASLt libraries can be loaded (cudarc panics otherwise).
pub fn version() -> Result<String> {
    // SAFETY: only attempts to dlopen the libraries.
    let present = unsafe { blas_sys::is_culib_present() && lt_sys::is_culib_present() };
    if !present {
        bail!(
            "libcublas / libcublasLt not found under the names cudarc tries (libcublas.so, \
             libcublas.so.12, …): the baselines need the CUDA toolkit libraries (the GPU bundle's \
             run.sh links a libcublas.so.13 it finds)"
        );
    }
    // SAFETY: cuBLASLt is loadable (checked above); the call takes no arguments.
    let version = unsafe { lt_sys::cublasLtGetVersion() };
    Ok(format!("{}.{}.{}", version / 10_000, version / 100 % 100, version % 100))
}

/// A cuBLAS handle bound to a stream.
pub struct Blas {
    handle: blas_sys::cublasHandle_t,
}

impl Blas {
    /// A handle issuing on `stream`.
    pub fn new(stream: blas_sys::cudaStream_t) -> Result<Self> {
        let handle = blas::create_handle().context("cublasCreate")?;
        // SAFETY: fresh handle, live stream.
        unsafe { blas::set_stream(handle, stream) }.context("cublasSetStream")?;
        Ok(Self { handle })
    }

    /// One GEMM of problem `p` on device addresses `a`, `b`, `c`.
    ///
    /// # Safety
    /// The addresses must hold the problem's matrices in `mode`'s element types.
    pub unsafe fn run(&self, mode: Mode, p: &GemmSpec, a: u64, b: u64, c: u64) -> Result<()> {
        let (ta, tb) = transposes(p);
        let op = |t| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let (alpha, beta) = (1.0f32, p.beta);
        let (m, n, k) = (p.n as i32, p.m as i32, p.k as i32);
        let (lda, ldb, ldc) = (p.ldb as i32, p.lda as i32, p.ldc as i32);
        let (stride_a, stride_b, stride_c) =
            (p.stride_b as i64, p.stride_a as i64, p.stride_c as i64);
        let compute = if mode == Mode::Tf32 {
            blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        } else {
            blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
        };
        let t = blas_type(mode);
        // SAFETY: the caller guarantees the matrices; scalars are f32 host values (default
        // pointer mode), as both entry points expect for these compute types.
        unsafe {
            if p.batch > 1 && mode == Mode::Fp32 {
                blas::sgemm_strided_batched(
                    self.handle,
                    op(ta),
                    op(tb),
                    m,
                    n,
                    k,
                    &alpha,
                    b as *const f32,
                    lda,
                    stride_a,
                    a as *const f32,
                    ldb,
                    stride_b,
                    &beta,
                    c as *mut f32,
                    ldc,
                    stride_c,
                    p.batch as i32,
                )
            } else if p.batch > 1 {
                blas::gemm_strided_batched_ex(
                    self.handle,
                    op(ta),
                    op(tb),
                    m,
                    n,
                    k,
                    (&alpha as *const f32).cast(),
                    b as *const c_void,
                    t,
                    lda,
                    stride_a,
                    a as *const c_void,
                    t,
                    ldb,
                    stride_b,
                    (&beta as *const f32).cast(),
                    c as *mut c_void,
                    t,
                    ldc,
                    stride_c,
                    p.batch as i32,
                    compute,
                    blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            } else if mode == Mode::Fp32 {
                blas::sgemm(
                    self.handle,
                    op(ta),
                    op(tb),
                    m,
                    n,
                    k,
                    &alpha,
                    b as *const f32,
                    lda,
                    a as *const f32,
                    ldb,
                    &beta,
                    c as *mut f32,
                    ldc,
                )
            } else {
                blas::gemm_ex(
                    self.handle,
                    op(ta),
                    op(tb),
                    m,
                    n,
                    k,
                    (&alpha as *const f32).cast(),
                    b as *const c_void,
                    t,
                    lda,
                    a as *const c_void,
                    t,
                    ldb,
                    (&beta as *const f32).cast(),
                    c as *mut c_void,
                    t,
                    ldc,
                    compute,
                    blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
        }
        .context("cuBLAS GEMM")
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: the handle is live and dropped once.
        let _ = unsafe { blas::destroy_handle(self.handle) };
    }
}

/// A cuBLASLt epilogue fused after the product, as the trainer fuses its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LtEpilogue {
    /// `BIAS`: `D = A·B + bias` (the qkv and attention projection forwards).
    Bias,
    /// `GELU_AUX_BIAS`: `D = gelu(A·B + bias)`, `aux = A·B + bias` (the fc layer's forward).
    GeluAuxBias,
    /// `DGELU_BGRAD`: `D = A·B ⊙ gelu'(aux)` and `bias = Σ_rows D` (the fc projection's input
    /// gradient with the fc bias gradient).
    DGeluBgrad,
}

impl LtEpilogue {
    /// cuBLASLt's name, for the report.
    pub fn name(self) -> &'static str {
        match self {
            LtEpilogue::Bias => "BIAS",
            LtEpilogue::GeluAuxBias => "GELU_AUX_BIAS",
            LtEpilogue::DGeluBgrad => "DGELU_BGRAD",
        }
    }

    /// Whether the epilogue has an auxiliary matrix (the pre-activation).
    pub fn uses_aux(self) -> bool {
        self != LtEpilogue::Bias
    }

    fn code(self) -> lt_sys::cublasLtEpilogue_t {
        match self {
            LtEpilogue::Bias => lt_sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
            LtEpilogue::GeluAuxBias => lt_sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
            LtEpilogue::DGeluBgrad => lt_sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DGELU_BGRAD,
        }
    }
}

/// A prepared `cublasLtMatmul`: descriptor, layouts and algorithm of one problem and mode.
pub struct LtPlan {
    handle: lt_sys::cublasLtHandle_t,
    desc: lt_sys::cublasLtMatmulDesc_t,
    layouts: [lt_sys::cublasLtMatrixLayout_t; 3],
    algo: lt_sys::cublasLtMatmulAlgo_t,
    workspace: u64,
    workspace_bytes: usize,
    beta: f32,
    epilogue: Option<LtEpilogue>,
}

impl LtPlan {
    /// Plans problem `p` in `mode`, with `workspace_bytes` of workspace at `workspace`.
    pub fn new(mode: Mode, p: &GemmSpec, workspace: u64, workspace_bytes: usize) -> Result<Self> {
        Self::plan(mode, p, None, (workspace, workspace_bytes))
    }

    /// Plans problem `p` in `mode` with `epilogue` fused: its auxiliary matrix laid out as C
    /// (leading dimension `ldc`) at `aux`, its bias vector at `bias` (the heuristic sees those;
    /// [`LtPlan::run_fused`] sets each call's).
    pub fn fused(
        mode: Mode,
        p: &GemmSpec,
        (epilogue, aux, bias): (LtEpilogue, u64, u64),
        workspace: u64,
        workspace_bytes: usize,
    ) -> Result<Self> {
        if p.batch > 1 {
            bail!("the fused epilogues are planned for single matrices");
        }
        Self::plan(mode, p, Some((epilogue, aux, bias)), (workspace, workspace_bytes))
    }

    fn plan(
        mode: Mode,
        p: &GemmSpec,
        epilogue: Option<(LtEpilogue, u64, u64)>,
        (workspace, workspace_bytes): (u64, usize),
    ) -> Result<Self> {
        let handle = lt::create_handle().context("cublasLtCreate")?;
        let compute = match mode {
            Mode::Tf32 => lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            _ => lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        };
        let desc = lt::create_matmul_desc(compute, lt_sys::cudaDataType_t::CUDA_R_32F)
            .context("cublasLtMatmulDescCreate")?;
        let (ta, tb) = transposes(p);
        let t = lt_type(mode);
        // First operand: Bᵀ (N×K) stored as B, second: Aᵀ (K×M) stored as A.
        let first = if ta { (p.k, p.n) } else { (p.n, p.k) };
        let second = if tb { (p.m, p.k) } else { (p.k, p.m) };
        let layout = |(rows, cols): (usize, usize), ld: usize, stride: usize| {
            let layout = lt::create_matrix_layout(t, rows as u64, cols as u64, ld as i64)
                .context("cublasLtMatrixLayoutCreate")?;
            if p.batch > 1 {
                let (count, stride) = (p.batch as i32, stride as i64);
                // SAFETY: a live layout; the values are an i32 count and an i64 stride, the
                // types cuBLASLt documents for these attributes.
                unsafe {
                    lt::set_matrix_layout_attribute(
                        layout,
                        lt_sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                        (&count as *const i32).cast(),
                        4,
                    )
                    .and_then(|()| {
                        lt::set_matrix_layout_attribute(
                            layout,
                            lt_sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                            (&stride as *const i64).cast(),
                            8,
                        )
                    })
                }
                .context("cublasLtMatrixLayoutSetAttribute")?;
            }
            anyhow::Ok(layout)
        };
        let layouts = [
            layout(first, p.ldb, p.stride_b)?,
            layout(second, p.lda, p.stride_a)?,
            layout((p.n, p.m), p.ldc, p.stride_c)?,
        ];
        // SAFETY: live descriptors; attribute values are i32 transposes, the u32 epilogue
        // enum, an i64 leading dimension and a usize size, the types cuBLASLt documents.
        unsafe {
            for (attr, value) in [
                (lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA, ta as i32),
                (lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB, tb as i32),
            ] {
                lt::set_matmul_desc_attribute(desc, attr, (&value as *const i32).cast(), 4)
                    .context("cublasLtMatmulDescSetAttribute")?;
            }
            if let Some((epilogue, aux, bias)) = epilogue {
                set_epilogue_pointers(desc, epilogue, aux, bias)?;
                let code = epilogue.code() as u32;
                lt::set_matmul_desc_attribute(
                    desc,
                    lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
                    (&code as *const u32).cast(),
                    4,
                )
                .context("cublasLtMatmulDescSetAttribute (epilogue)")?;
                if epilogue.uses_aux() {
                    let aux_ld = p.ldc as i64;
                    lt::set_matmul_desc_attribute(
                        desc,
                        lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                        (&aux_ld as *const i64).cast(),
                        8,
                    )
                    .context("cublasLtMatmulDescSetAttribute (aux ld)")?;
                }
            }
            let pref = lt::create_matmul_pref().context("cublasLtMatmulPreferenceCreate")?;
            lt::set_matmul_pref_attribute(
                pref,
                lt_sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&workspace_bytes as *const usize).cast(),
                size_of::<usize>(),
            )
            .context("cublasLtMatmulPreferenceSetAttribute")?;
            let heuristic = lt::get_matmul_algo_heuristic(
                handle, desc, layouts[0], layouts[1], layouts[2], layouts[2], pref,
            );
            let _ = lt::destroy_matmul_pref(pref);
            let algo = heuristic.context("cublasLtMatmulAlgoGetHeuristic")?.algo;
            let epilogue = epilogue.map(|(e, _, _)| e);
            Ok(Self {
                handle,
                desc,
                layouts,
                algo,
                workspace,
                workspace_bytes,
                beta: p.beta,
                epilogue,
            })
        }
    }

    /// One matmul of a [`LtPlan::fused`] plan on device addresses `a`, `b`, `c`, its auxiliary
    /// matrix `aux` (written by `GELU_AUX_BIAS`, read by `DGELU_BGRAD`, unused by `BIAS`) and
    /// its bias vector `bias` (read by `BIAS` and `GELU_AUX_BIAS`, written by `DGELU_BGRAD`; N
    /// elements of C's type).
    ///
    /// # Safety
    /// The addresses must hold the planned problem's matrices and vector.
    pub unsafe fn run_fused(
        &self,
        (a, b, c): (u64, u64, u64),
        (aux, bias): (u64, u64),
        stream: lt_sys::cudaStream_t,
    ) -> Result<()> {
        let Some(epilogue) = self.epilogue else {
            bail!("run_fused on a plan without an epilogue");
        };
        set_epilogue_pointers(self.desc, epilogue, aux, bias)?;
        // SAFETY: forwarded contract.
        unsafe { self.run(a, b, c, stream) }
    }

    /// One matmul on device addresses `a`, `b`, `c`.
    ///
    /// # Safety
    /// The addresses must hold the planned problem's matrices.
    pub unsafe fn run(&self, a: u64, b: u64, c: u64, stream: lt_sys::cudaStream_t) -> Result<()> {
        let alpha = 1.0f32;
        // SAFETY: the caller guarantees the matrices; the plan's objects are live.
        unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                (&alpha as *const f32).cast(),
                (&self.beta as *const f32).cast(),
                b as *const c_void,
                self.layouts[0],
                a as *const c_void,
                self.layouts[1],
                c as *const c_void,
                self.layouts[2],
                c as *mut c_void,
                self.layouts[2],
                &self.algo,
                self.workspace as *mut c_void,
                self.workspace_bytes,
                stream,
            )
        }
        .context("cublasLtMatmul")
    }
}

/// Sets the bias vector pointer of the live descriptor `desc`, and its auxiliary matrix's
/// where `epilogue` has one.
fn set_epilogue_pointers(
    desc: lt_sys::cublasLtMatmulDesc_t,
    epilogue: LtEpilogue,
    aux: u64,
    bias: u64,
) -> Result<()> {
    use lt_sys::cublasLtMatmulDescAttributes_t as Attr;
    let aux = epilogue.uses_aux().then_some((Attr::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux));
    for (attr, ptr) in aux.into_iter().chain([(Attr::CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias)]) {
        // SAFETY: the caller's live descriptor; the value is a device pointer, as documented.
        unsafe {
            lt::set_matmul_desc_attribute(desc, attr, (&ptr as *const u64).cast(), size_of::<u64>())
        }
        .context("cublasLtMatmulDescSetAttribute (epilogue pointers)")?;
    }
    Ok(())
}

impl Drop for LtPlan {
    fn drop(&mut self) {
        // SAFETY: every object is live and destroyed once.
        unsafe {
            for layout in self.layouts {
                let _ = lt::destroy_matrix_layout(layout);
            }
            let _ = lt::destroy_matmul_desc(self.desc);
            let _ = lt::destroy_handle(self.handle);
        }
    }
}
