//! Validation of the PTX simulator against a GPU: the same kernels with the same random inputs
//! run on both; exactly rounded results must be bit-identical and `.approx` ones must agree
//! within the PTX ISA's documented error. This is what checks the simulator's semantic
//! assumptions (canonical NaNs, tf32 rounding, min/max of signed zeros, float-to-integer
//! saturation, shuffle lane arithmetic, ...). The GPU tests print `skipped: no GPU (...)` and
//! pass where there is none; `instruction_zoo_runs_on_the_simulator` always runs, so the zoo's
//! PTX stays executable.
//!
//! Two parts: the project's kernels (through the `gpu-host` launchers: the elementwise kernels,
//! the probes, and the exactly rounded GPT-2 op kernels) and an instruction
//! "zoo", a hand-written PTX kernel applying ~75 instructions to special and random operands,
//! loaded on the GPU through cudarc.

use gpu_host::kernels::adamw::{
    AdamWBuffers, AdamWHyper, AdamWTable, AdamWTensor, WorkingRounding, adamw,
};
use gpu_host::kernels::elementwise::{add, cast, fill, round_tf32, scale};
use gpu_host::kernels::encoder::{TokenShape, Tokens, encoder_backward, encoder_forward};
use gpu_host::kernels::grad_norm::{GRAD_NORM_WORKSPACE_LEN, grad_norm};
use gpu_host::kernels::layernorm::{
    LayerNormBackward, LayerNormForward, LayerNormStats, ResidualLayerNormForward,
    layernorm_backward, layernorm_backward_scratch_len, layernorm_forward,
    residual_layernorm_forward,
};
use gpu_host::kernels::probe::{self, MmaKind};
use gpu_host::{Device, DeviceBuffer, Gpu, LaunchConfig};
use half::{bf16, f16};
use integration_tests::{TestRng, gpu, sim};
use ptx_sim::Simulator;

mod hopper;
mod rig;

use rig::{GpuRig, Rig, SimRig};

/// Operand patterns that exercise every special case the kernels can meet.
const SPECIALS: &[u32] = &[
    0x0000_0000,
    0x8000_0000,
    0x3f80_0000,
    0xbf80_0000,
    0x7f80_0000,
    0xff80_0000,
    0x7fc0_0000,
    0xffc0_0001,
    0x7f80_0001,
    0x0000_0001,
    0x807f_ffff,
    0x7f7f_ffff,
    0x0080_0000,
    0x477f_f000,
    0x3f80_8000,
    0x3f81_8000,
    0x3f80_1000,
    0x7f7f_f000,
    0x4020_0000,
    0xc020_0000,
    0x3f00_0000,
    0x4f00_0000,
    0xcf00_0000,
    0x4f80_0000,
    0x8000_0001,
    0xffff_ffff,
    0x7fff_ffff,
    0x3380_0000,
    0x3300_0000,
    0x33c0_0000,
];

/// `n` operands: half special patterns, a quarter random bit patterns, a quarter random floats
/// over many binades.
fn operands(rng: &mut TestRng, n: usize) -> Vec<u32> {
    let bits = rng.bytes(4 * n);
    let mags = rng.uniform(n, -40.0, 40.0);
    let picks = rng.u16s(n);
    (0..n)
        .map(|i| {
            let word = u32::from_le_bytes([
                bits[4 * i],
                bits[4 * i + 1],
                bits[4 * i + 2],
                bits[4 * i + 3],
            ]);
            match picks[i] % 4 {
                0 | 1 => SPECIALS[word as usize % SPECIALS.len()],
                2 => word,
                _ => (mags[i].exp2() * if word & 1 == 0 { 1.0 } else { -1.0 }).to_bits(),
            }
        })
        .collect()
}

fn both() -> Option<(&'static Gpu, &'static Simulator)> {
    Some((gpu()?, sim()))
}

/// Distance in units in the last place between two finite floats of the same sign.
fn ulps(a: f32, b: f32) -> u32 {
    let key = |x: f32| {
        let b = x.to_bits() as i64;
        if b < 0x8000_0000 { b } else { 0x8000_0000 - b }
    };
    (key(a) - key(b)).unsigned_abs() as u32
}

/// Named outputs of one runtime: raw bytes (compared bit for bit) or f32 values.
type Outputs<T> = Vec<(String, Vec<T>)>;

/// One `mma` probe's result on one runtime, with `Σ|a·b| + |c|` of each element.
struct MmaOutput {
    name: String,
    d: Vec<f32>,
    scale: Vec<f64>,
}

/// Largest `|got - want| / scale` over one case; a NaN on either side is infinitely far.
fn worst_relative(got: &[f32], want: &[f64], scale: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .zip(scale)
        .map(
            |((g, w), s)| {
                if g.is_nan() || w.is_nan() { f64::INFINITY } else { (*g as f64 - w).abs() / s }
            },
        )
        .fold(0.0, f64::max)
}

/// Two 16-bit operands as one word, `lo` in the low half.
fn pack16(lo: u16, hi: u16) -> u32 {
    lo as u32 | (hi as u32) << 16
}

/// Every elementwise kernel on special and random inputs.
fn elementwise_outputs<D: Device>(dev: &D, seed: u64) -> Outputs<u8> {
    let mut rng = TestRng::with_seed(seed);
    let n = 4099;
    let words = operands(&mut rng, n);
    let f32s: Vec<f32> = words.iter().map(|w| f32::from_bits(*w)).collect();
    let f32b: Vec<f32> = operands(&mut rng, n).iter().map(|w| f32::from_bits(*w)).collect();
    let h16 = rng.u16s(n);
    let h16b = rng.u16s(n);
    let alpha = rng.scalar(-3.0, 3.0);
    let mut out = Vec::new();
    macro_rules! family {
        ($ty:ty, $a:expr, $b:expr) => {{
            let a: Vec<$ty> = $a;
            let b: Vec<$ty> = $b;
            let (da, db) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
            let mut o = dev.alloc::<$ty>(n).unwrap();
            add(dev, da.view(), db.view(), o.view_mut()).unwrap();
            out.push((
                format!("add_{}", stringify!($ty)),
                bytemuck::cast_slice(&dev.download(o.view()).unwrap()).to_vec(),
            ));
            scale(dev, da.view(), alpha, o.view_mut()).unwrap();
            out.push((
                format!("scale_{}", stringify!($ty)),
                bytemuck::cast_slice(&dev.download(o.view()).unwrap()).to_vec(),
            ));
            fill(dev, o.view_mut(), a[7]).unwrap();
            out.push((
                format!("fill_{}", stringify!($ty)),
                bytemuck::cast_slice(&dev.download(o.view()).unwrap()).to_vec(),
            ));
        }};
    }
    family!(f32, f32s.clone(), f32b.clone());
    family!(
        bf16,
        h16.iter().map(|b| bf16::from_bits(*b)).collect(),
        h16b.iter().map(|b| bf16::from_bits(*b)).collect()
    );
    family!(
        f16,
        h16.iter().map(|b| f16::from_bits(*b)).collect(),
        h16b.iter().map(|b| f16::from_bits(*b)).collect()
    );
    let src = dev.upload(&f32s).unwrap();
    let mut to_bf16 = dev.alloc::<bf16>(n).unwrap();
    cast(dev, src.view(), to_bf16.view_mut()).unwrap();
    out.push((
        "cast_f32_bf16".into(),
        bytemuck::cast_slice(&dev.download(to_bf16.view()).unwrap()).to_vec(),
    ));
    let mut to_f16 = dev.alloc::<f16>(n).unwrap();
    cast(dev, src.view(), to_f16.view_mut()).unwrap();
    out.push((
        "cast_f32_f16".into(),
        bytemuck::cast_slice(&dev.download(to_f16.view()).unwrap()).to_vec(),
    ));
    let mut back = dev.alloc::<f32>(n).unwrap();
    cast(dev, to_bf16.view(), back.view_mut()).unwrap();
    out.push((
        "cast_bf16_f32".into(),
        bytemuck::cast_slice(&dev.download(back.view()).unwrap()).to_vec(),
    ));
    let h = dev.upload(&h16.iter().map(|b| f16::from_bits(*b)).collect::<Vec<_>>()).unwrap();
    cast(dev, h.view(), back.view_mut()).unwrap();
    out.push((
        "cast_f16_f32".into(),
        bytemuck::cast_slice(&dev.download(back.view()).unwrap()).to_vec(),
    ));
    round_tf32(dev, src.view(), back.view_mut()).unwrap();
    out.push((
        "round_tf32_f32".into(),
        bytemuck::cast_slice(&dev.download(back.view()).unwrap()).to_vec(),
    ));
    out
}

/// The GPT-2 op kernels whose arithmetic is exactly rounded IEEE (`.rn` adds and multiplies,
/// `sqrt.rn`, `div.rn`, shuffles; no `.approx`): layernorm forward, fused residual + forward and
/// backward, encoder forward and backward, the gradient norm and AdamW (nearest and stochastic
/// rounding), on bf16 data in shapes with partial vectors and blocks.
fn op_outputs<D: Device>(dev: &D, seed: u64) -> Outputs<u8> {
    let mut rng = TestRng::with_seed(seed);
    let mut out: Outputs<u8> = Vec::new();
    let mut record = |name: &str, bytes: &[u8]| out.push((name.to_string(), bytes.to_vec()));
    let bf = |v: Vec<f32>| -> Vec<bf16> { v.into_iter().map(bf16::from_f32).collect() };
    let (rows, c) = (37, 264);
    let x = dev.upload(&bf(rng.uniform(rows * c, -3.0, 3.0))).unwrap();
    let x2 = dev.upload(&bf(rng.uniform(rows * c, -1.0, 1.0))).unwrap();
    let w = dev.upload(&bf(rng.uniform(c, -2.0, 2.0))).unwrap();
    let bias = dev.upload(&bf(rng.uniform(c, -1.0, 1.0))).unwrap();
    let (mut y, mut residual) =
        (dev.alloc::<bf16>(rows * c).unwrap(), dev.alloc(rows * c).unwrap());
    let (mut mean, mut rstd) = (dev.alloc::<f32>(rows).unwrap(), dev.alloc::<f32>(rows).unwrap());
    let args = ResidualLayerNormForward {
        inp1: x.view(),
        inp2: x2.view(),
        residual: residual.view_mut(),
        weight: w.view(),
        bias: bias.view(),
        out: y.view_mut(),
        stats: Some(LayerNormStats { mean: mean.view_mut(), rstd: rstd.view_mut() }),
    };
    residual_layernorm_forward(dev, c, args).unwrap();
    record(
        "residual_layernorm_forward out",
        bytemuck::cast_slice(&dev.download(y.view()).unwrap()),
    );
    record(
        "residual_layernorm_forward residual",
        bytemuck::cast_slice(&dev.download(residual.view()).unwrap()),
    );
    record(
        "residual_layernorm_forward mean",
        bytemuck::cast_slice(&dev.download(mean.view()).unwrap()),
    );
    record(
        "residual_layernorm_forward rstd",
        bytemuck::cast_slice(&dev.download(rstd.view()).unwrap()),
    );
    let stats = Some(LayerNormStats { mean: mean.view_mut(), rstd: rstd.view_mut() });
    let args = LayerNormForward {
        inp: x.view(),
        weight: w.view(),
        bias: bias.view(),
        out: y.view_mut(),
        stats,
    };
    layernorm_forward(dev, c, args).unwrap();
    record("layernorm_forward out", bytemuck::cast_slice(&dev.download(y.view()).unwrap()));
    record("layernorm_forward mean", bytemuck::cast_slice(&dev.download(mean.view()).unwrap()));
    record("layernorm_forward rstd", bytemuck::cast_slice(&dev.download(rstd.view()).unwrap()));
    let mut dinp = dev.upload(&bf(rng.uniform(rows * c, -1.0, 1.0))).unwrap();
    let (mut dw, mut db) = (
        dev.upload(&rng.uniform(c, -1.0, 1.0)).unwrap(),
        dev.upload(&rng.uniform(c, -1.0, 1.0)).unwrap(),
    );
    let mut dinp_sum = dev.upload(&rng.uniform(c, -1.0, 1.0)).unwrap();
    let mut scratch = dev.alloc::<f32>(layernorm_backward_scratch_len(rows, c, true)).unwrap();
    let args = LayerNormBackward {
        dout: x2.view(),
        inp: x.view(),
        weight: w.view(),
        mean: mean.view(),
        rstd: rstd.view(),
        dinp: dinp.view_mut(),
        dweight: dw.view_mut(),
        dbias: db.view_mut(),
        dinp_sum: Some(dinp_sum.view_mut()),
        beta: 1.0,
        scratch: scratch.view_mut(),
    };
    layernorm_backward(dev, c, args).unwrap();
    record("layernorm_backward dinp", bytemuck::cast_slice(&dev.download(dinp.view()).unwrap()));
    record("layernorm_backward dweight", bytemuck::cast_slice(&dev.download(dw.view()).unwrap()));
    record("layernorm_backward dbias", bytemuck::cast_slice(&dev.download(db.view()).unwrap()));
    let dinp_sum = dev.download(dinp_sum.view()).unwrap();
    record("layernorm_backward dinp_sum", bytemuck::cast_slice(&dinp_sum));

    let (b, t, vocab) = (3, 11, 50);
    let ids: Vec<u32> = rng.u16s(b * t).iter().map(|v| u32::from(*v) % vocab as u32).collect();
    let mut tokens = Tokens::upload(dev, &ids, TokenShape { b, t, vocab }).unwrap();
    let wte = dev.upload(&bf(rng.uniform(vocab * c, -1.0, 1.0))).unwrap();
    let wpe = dev.upload(&bf(rng.uniform(t * c, -1.0, 1.0))).unwrap();
    let mut emb = dev.alloc::<bf16>(b * t * c).unwrap();
    encoder_forward(dev, &tokens, wte.view(), wpe.view(), emb.view_mut(), c).unwrap();
    record("encoder_forward", bytemuck::cast_slice(&dev.download(emb.view()).unwrap()));
    let mut dwte = dev.upload(&rng.uniform(vocab * c, -1.0, 1.0)).unwrap();
    let mut dwpe = dev.upload(&rng.uniform(t * c, -1.0, 1.0)).unwrap();
    encoder_backward(dev, &mut tokens, emb.view(), dwte.view_mut(), dwpe.view_mut(), c).unwrap();
    record("encoder_backward dwte", bytemuck::cast_slice(&dev.download(dwte.view()).unwrap()));
    record("encoder_backward dwpe", bytemuck::cast_slice(&dev.download(dwpe.view()).unwrap()));

    let n = 10_243;
    let grads = dev.upload(&bf(rng.uniform(n, -2.0, 2.0))).unwrap();
    let mut workspace = dev.alloc::<u64>(GRAD_NORM_WORKSPACE_LEN).unwrap();
    let mut norm = dev.alloc::<f32>(2).unwrap();
    grad_norm(dev, grads.view(), workspace.view_mut(), norm.view_mut()).unwrap();
    record("grad_norm", bytemuck::cast_slice(&dev.download(norm.view()).unwrap()));
    let tensors = [
        AdamWTensor { offset: 0, len: 4001, weight_decay: 0.1 },
        AdamWTensor { offset: 4003, len: (n - 4003) as u32, weight_decay: 0.0 },
    ];
    let table = AdamWTable::new(dev, &tensors, n).unwrap();
    for rounding in [WorkingRounding::NearestEven, WorkingRounding::Stochastic { seed: 7 }] {
        let mut params = dev.upload(&rng.uniform(n, -1.0, 1.0)).unwrap();
        let mut m = dev.upload(&rng.uniform(n, -0.1, 0.1)).unwrap();
        let mut v = dev.upload(&rng.uniform(n, 0.0, 0.01)).unwrap();
        // Uploaded, not allocated: the elements between the two tensors must keep their bits
        // on both devices (a fresh allocation's contents differ between them).
        let mut working = dev.upload(&bf(rng.uniform(n, -1.0, 1.0))).unwrap();
        let bufs = AdamWBuffers {
            params: params.view_mut(),
            grads: grads.view(),
            m: m.view_mut(),
            v: v.view_mut(),
            working: Some(working.view_mut()),
        };
        let hyper = AdamWHyper {
            lr: 3e-4,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            t: 3,
            grad_scale: 0.5,
            rounding,
        };
        adamw(dev, &table, bufs, &hyper).unwrap();
        record(
            &format!("adamw {rounding:?} params"),
            bytemuck::cast_slice(&dev.download(params.view()).unwrap()),
        );
        record(
            &format!("adamw {rounding:?} working"),
            bytemuck::cast_slice(&dev.download(working.view()).unwrap()),
        );
    }
    out
}

/// The bit-exact probes (ldmatrix, cp.async, shuffles) and the mma probes' raw outputs.
fn probe_outputs<D: Device>(dev: &D, seed: u64) -> (Outputs<u8>, Vec<MmaOutput>) {
    let mut rng = TestRng::with_seed(seed);
    let mut exact = Vec::new();
    let src = dev.upload(&rng.u16s(256)).unwrap();
    for matrices in [1, 2, 4] {
        for trans in [false, true] {
            let mut o = dev.alloc::<u32>(128).unwrap();
            probe::ldmatrix(dev, matrices, trans, src.view(), o.view_mut()).unwrap();
            exact.push((
                format!("ldmatrix x{matrices} trans={trans}"),
                bytemuck::cast_slice(&dev.download(o.view()).unwrap()).to_vec(),
            ));
        }
    }
    let bytes = dev.upload(&rng.bytes(512)).unwrap();
    for len in [0, 5, 17, 511, 512] {
        let mut o = dev.alloc::<u8>(512).unwrap();
        probe::cp_async(dev, bytes.view(), len, o.view_mut()).unwrap();
        exact.push((format!("cp.async {len}"), dev.download(o.view()).unwrap()));
    }
    let x: Vec<f32> = operands(&mut rng, 32).iter().map(|w| f32::from_bits(*w)).collect();
    let dx = dev.upload(&x).unwrap();
    let mut o = dev.alloc::<f32>(128).unwrap();
    probe::warp(dev, dx.view(), o.view_mut()).unwrap();
    exact.push(("warp".into(), bytemuck::cast_slice(&dev.download(o.view()).unwrap()).to_vec()));
    let mut mma = Vec::new();
    for kind in [MmaKind::Bf16, MmaKind::F16, MmaKind::Tf32] {
        // `v` as operand words (one per word for tf32, two for the 16-bit kinds), and the
        // values the kernel reads (rounded to the 16-bit kinds).
        let words = |v: &[f32]| -> (Vec<u32>, Vec<f32>) {
            match kind {
                MmaKind::Tf32 => (v.iter().map(|x| x.to_bits()).collect(), v.to_vec()),
                MmaKind::Bf16 => {
                    let h: Vec<bf16> = v.iter().map(|x| bf16::from_f32(*x)).collect();
                    let w = h.chunks(2).map(|p| pack16(p[0].to_bits(), p[1].to_bits()));
                    (w.collect(), h.iter().map(|x| x.to_f32()).collect())
                }
                MmaKind::F16 => {
                    let h: Vec<f16> = v.iter().map(|x| f16::from_f32(*x)).collect();
                    let w = h.chunks(2).map(|p| pack16(p[0].to_bits(), p[1].to_bits()));
                    (w.collect(), h.iter().map(|x| x.to_f32()).collect())
                }
            }
        };
        let k = kind.k();
        let (a_words, a) = words(&rng.uniform(16 * k, -4.0, 4.0));
        let (b_words, b) = words(&rng.uniform(8 * k, -4.0, 4.0));
        let c = rng.uniform(128, -1.0, 1.0);
        let (da, db, dc) =
            (dev.upload(&a_words).unwrap(), dev.upload(&b_words).unwrap(), dev.upload(&c).unwrap());
        let mut d = dev.alloc::<f32>(128).unwrap();
        probe::mma(dev, kind, da.view(), db.view(), dc.view(), d.view_mut()).unwrap();
        // D (16 × 8) = A (16 × k, row-major) · B (stored n-major: B[n][kk] at n·k + kk) + C.
        let scale = (0..128)
            .map(|i| {
                let (m, n) = (i / 8, i % 8);
                let products: f64 =
                    (0..k).map(|kk| (a[m * k + kk] * b[n * k + kk]).abs() as f64).sum();
                products + (c[i] as f64).abs()
            })
            .collect();
        mma.push(MmaOutput {
            name: format!("mma {kind:?}"),
            d: dev.download(d.view()).unwrap(),
            scale,
        });
    }
    (exact, mma)
}

#[test]
fn project_kernels_agree_bit_for_bit() {
    let Some((gpu, sim)) = both() else { return };
    let seed = TestRng::new().seed();
    let (g, s) = (elementwise_outputs(gpu, seed), elementwise_outputs(sim, seed));
    let ((ge, gm), (se, sm)) = (probe_outputs(gpu, seed), probe_outputs(sim, seed));
    let (go, so) = (op_outputs(gpu, seed), op_outputs(sim, seed));
    let mut failures = Vec::new();
    for ((name, gv), (_, sv)) in
        g.iter().zip(&s).chain(ge.iter().zip(&se)).chain(go.iter().zip(&so))
    {
        if let Some(i) = (0..gv.len()).find(|&i| gv[i] != sv[i]) {
            failures.push(format!(
                "{name}: first difference at byte {i}: gpu {:#04x} sim {:#04x}",
                gv[i], sv[i]
            ));
        }
    }
    // An mma's sum of products is rounded in an order of its own: a difference is measured
    // against Σ|a·b| + |c| (a result that cancels to near 0 differed by 32 ulp of itself on
    // an H100, 1.2e-8 of that sum), within 2⁻²¹ (a few f32 roundings on each side).
    for (g, s) in gm.iter().zip(&sm) {
        let sim: Vec<f64> = s.d.iter().map(|v| *v as f64).collect();
        let worst = worst_relative(&g.d, &sim, &g.scale);
        let ulp = g.d.iter().zip(&s.d).map(|(a, b)| ulps(*a, *b)).max().unwrap_or(0);
        eprintln!(
            "sim_vs_gpu: {}: largest difference {worst:.2e} of Σ|a·b| + |c| ({ulp} ulp)",
            g.name
        );
        if worst > f64::powi(2.0, -21) {
            failures
                .push(format!("{}: results differ by up to {worst:.2e} of Σ|a·b| + |c|", g.name));
        }
    }
    assert!(
        failures.is_empty(),
        "simulator and GPU disagree (TEST_SEED={seed}):\n{}",
        failures.join("\n")
    );
    eprintln!("sim_vs_gpu: project kernels agree on {} (seed {seed})", gpu.describe());
}

/// The op-kernel comparison's inputs and launches run on the simulator on every machine, so a
/// GPU session never finds them broken; two runs give the same bits.
#[test]
fn op_kernels_run_on_the_simulator() {
    let seed = TestRng::new().seed();
    let (a, b) = (op_outputs(sim(), seed), op_outputs(sim(), seed));
    assert_eq!(a.len(), 19);
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{name} differs between two simulator runs (TEST_SEED={seed})");
    }
}

/// How a zoo result is compared.
#[derive(Clone, Copy)]
enum Check {
    /// Bit-identical.
    Exact,
    /// `|gpu - sim| <= abs + rel * |sim|` (NaN matches NaN, infinities must be equal).
    Approx { rel: f64, abs: f64 },
}

const EXACT: Check = Check::Exact;
const fn approx(rel_log2: i32, abs_log2: i32) -> Check {
    Check::Approx { rel: pow2(rel_log2), abs: pow2(abs_log2) }
}
const fn pow2(e: i32) -> f64 {
    let mut v = 1.0;
    let mut i = 0;
    while i < -e {
        v /= 2.0;
        i += 1;
    }
    v
}

/// The zoo: each op reads `%r1` = a, `%r2` = b (special or random bits) and `%r3` = c (a
/// float in [-pi, pi]) and leaves a 32-bit result in `%r10`. Bounds of `.approx` ops are the
/// PTX ISA's, loosened by a factor of 2.
const ZOO: &[(&str, Check)] = &[
    ("add.rn.f32 %r10, %r1, %r2;", EXACT),
    ("sub.rn.f32 %r10, %r1, %r2;", EXACT),
    ("mul.rn.f32 %r10, %r1, %r2;", EXACT),
    ("fma.rn.f32 %r10, %r1, %r2, %r3;", EXACT),
    ("div.rn.f32 %r10, %r1, %r2;", EXACT),
    ("sqrt.rn.f32 %r10, %r1;", EXACT),
    ("rcp.rn.f32 %r10, %r1;", EXACT),
    ("add.rn.ftz.f32 %r10, %r1, %r2;", EXACT),
    ("mul.rn.ftz.f32 %r10, %r1, %r2;", EXACT),
    ("fma.rn.ftz.sat.f32 %r10, %r1, %r2, %r3;", EXACT),
    ("min.f32 %r10, %r1, %r2;", EXACT),
    ("max.f32 %r10, %r1, %r2;", EXACT),
    ("min.NaN.f32 %r10, %r1, %r2;", EXACT),
    ("max.ftz.f32 %r10, %r1, %r2;", EXACT),
    ("abs.f32 %r10, %r1;", EXACT),
    ("neg.f32 %r10, %r1;", EXACT),
    ("copysign.f32 %r10, %r1, %r2;", EXACT),
    ("testp.subnormal.f32 %p1, %r1;\n\tselp.u32 %r10, 1, 0, %p1;", EXACT),
    (
        "setp.lt.f32 %p1, %r1, %r2;\n\tsetp.ltu.f32 %p2, %r1, %r2;\n\tsetp.neu.f32 %p3, %r1, %r2;\n\
      \tselp.u32 %r11, 1, 0, %p1;\n\tselp.u32 %r12, 2, 0, %p2;\n\tselp.u32 %r13, 4, 0, %p3;\n\
      \tor.b32 %r10, %r11, %r12;\n\tor.b32 %r10, %r10, %r13;",
        EXACT,
    ),
    ("cvt.rn.f16x2.f32 %r10, %r1, %r2;", EXACT),
    ("cvt.rn.bf16x2.f32 %r10, %r1, %r2;", EXACT),
    ("cvt.rn.relu.f16x2.f32 %r10, %r1, %r2;", EXACT),
    ("cvt.rn.relu.bf16x2.f32 %r10, %r1, %r2;", EXACT),
    ("cvt.rna.tf32.f32 %r10, %r1;", EXACT),
    ("cvt.rzi.s32.f32 %r10, %r1;", EXACT),
    ("cvt.rni.s32.f32 %r10, %r1;", EXACT),
    ("cvt.rmi.u32.f32 %r10, %r1;", EXACT),
    ("cvt.rzi.s16.f32 %r10, %r1;", EXACT),
    ("cvt.rn.f32.s32 %r10, %r1;", EXACT),
    ("cvt.rz.f32.u32 %r10, %r1;", EXACT),
    ("cvt.rni.f32.f32 %r10, %r1;", EXACT),
    ("cvt.rmi.f32.f32 %r10, %r1;", EXACT),
    ("cvt.rn.f16.f32 %rs1, %r1;\n\tcvt.u32.u16 %r10, %rs1;", EXACT),
    ("mov.b32 {%rs1, %rs2}, %r1;\n\tcvt.f32.f16 %r10, %rs1;", EXACT),
    ("cvt.sat.s8.s32 %r10, %r1;", EXACT),
    ("cvt.s16.s32 %r10, %r1;", EXACT),
    ("mul.hi.s32 %r10, %r1, %r2;", EXACT),
    ("mul.hi.u32 %r10, %r1, %r2;", EXACT),
    ("mad.lo.s32 %r10, %r1, %r2, %r3;", EXACT),
    ("or.b32 %r11, %r2, 1;\n\tdiv.s32 %r10, %r1, %r11;", EXACT),
    ("or.b32 %r11, %r2, 1;\n\trem.s32 %r10, %r1, %r11;", EXACT),
    ("shl.b32 %r10, %r1, %r2;", EXACT),
    ("shr.s32 %r10, %r1, %r2;", EXACT),
    ("shr.u32 %r10, %r1, %r2;", EXACT),
    ("bfe.s32 %r10, %r1, %r2, %r3;", EXACT),
    ("bfe.u32 %r10, %r1, %r2, %r3;", EXACT),
    ("bfi.b32 %r10, %r1, %r2, %r3, %r2;", EXACT),
    ("prmt.b32 %r10, %r1, %r2, %r3;", EXACT),
    ("shf.l.wrap.b32 %r10, %r1, %r2, %r3;", EXACT),
    ("shf.r.clamp.b32 %r10, %r1, %r2, %r3;", EXACT),
    ("lop3.b32 %r10, %r1, %r2, %r3, 0xE8;", EXACT),
    ("popc.b32 %r10, %r1;", EXACT),
    ("clz.b32 %r10, %r1;", EXACT),
    ("brev.b32 %r10, %r1;", EXACT),
    ("bfind.s32 %r10, %r1;", EXACT),
    ("bfind.shiftamt.u32 %r10, %r1;", EXACT),
    ("min.s32 %r10, %r1, %r2;", EXACT),
    ("max.u32 %r10, %r1, %r2;", EXACT),
    ("add.sat.s32 %r10, %r1, %r2;", EXACT),
    ("sub.sat.s32 %r10, %r1, %r2;", EXACT),
    ("shfl.sync.up.b32 %r10, %r1, 3, 0x1000, -1;", EXACT),
    ("and.b32 %r11, %r2, 31;\n\tshfl.sync.idx.b32 %r10, %r1, %r11, 0x1f, -1;", EXACT),
    (
        "shfl.sync.bfly.b32 %r10|%p1, %r1, %r2, 0x81f, -1;\n\tselp.u32 %r11, 0x1, 0, %p1;\n\txor.b32 %r10, %r10, %r11;",
        EXACT,
    ),
    ("setp.lt.u32 %p1, %r1, %r2;\n\tvote.sync.ballot.b32 %r10, %p1, -1;", EXACT),
    ("redux.sync.min.s32 %r10, %r1, -1;", EXACT),
    ("redux.sync.add.u32 %r10, %r1, -1;", EXACT),
    ("mul.rn.f32 %r11, %r3, 0f41A00000;\n\tex2.approx.f32 %r10, %r11;", approx(-21, -126)),
    ("mul.rn.f32 %r11, %r3, 0f41A00000;\n\tex2.approx.ftz.f32 %r10, %r11;", approx(-21, -126)),
    ("abs.f32 %r11, %r1;\n\tlg2.approx.f32 %r10, %r11;", approx(-21, -21)),
    ("rcp.approx.f32 %r10, %r1;", approx(-22, -126)),
    ("rcp.approx.ftz.f32 %r10, %r1;", approx(-22, -126)),
    ("abs.f32 %r11, %r1;\n\trsqrt.approx.f32 %r10, %r11;", approx(-21, -126)),
    ("abs.f32 %r11, %r1;\n\tsqrt.approx.f32 %r10, %r11;", approx(-22, -126)),
    ("mul.rn.f32 %r11, %r3, 0f40400000;\n\ttanh.approx.f32 %r10, %r11;", approx(-10, -20)),
    ("sin.approx.f32 %r10, %r3;", approx(-60, -19)),
    ("cos.approx.f32 %r10, %r3;", approx(-60, -19)),
    ("div.approx.f32 %r10, %r1, %r2;", approx(-21, -126)),
    ("div.full.f32 %r10, %r1, %r2;", approx(-21, -126)),
];

/// The zoo kernel `zoo(.u64 out, .u64 in)`: thread t reads (a, b, c) from `in[3t..]` and
/// writes op j's result to `out[t * ZOO.len() + j]`.
fn zoo_ptx() -> String {
    let mut body = String::new();
    for (j, (op, _)) in ZOO.iter().enumerate() {
        body.push_str(&format!("\t{op}\n\tst.global.u32 [%rd4+{}], %r10;\n", 4 * j));
    }
    format!(
        ".version 7.8\n.target sm_80\n.address_size 64\n\
         .visible .entry zoo(.param .u64 zoo_out, .param .u64 zoo_in)\n{{\n\
         \t.reg .pred %p<4>;\n\t.reg .b16 %rs<4>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<8>;\n\
         \tld.param.u64 %rd0, [zoo_out];\n\tld.param.u64 %rd1, [zoo_in];\n\
         \tcvta.to.global.u64 %rd0, %rd0;\n\tcvta.to.global.u64 %rd1, %rd1;\n\
         \tmov.u32 %r4, %ctaid.x;\n\tmov.u32 %r5, %ntid.x;\n\tmov.u32 %r6, %tid.x;\n\
         \tmad.lo.u32 %r7, %r4, %r5, %r6;\n\
         \tmul.wide.u32 %rd2, %r7, 12;\n\tadd.s64 %rd3, %rd1, %rd2;\n\
         \tld.global.u32 %r1, [%rd3];\n\tld.global.u32 %r2, [%rd3+4];\n\tld.global.u32 %r3, [%rd3+8];\n\
         \tmul.wide.u32 %rd2, %r7, {};\n\tadd.s64 %rd4, %rd0, %rd2;\n{body}\tret;\n}}\n",
        4 * ZOO.len()
    )
}

const ZOO_THREADS: usize = 4096;

fn zoo_inputs(seed: u64) -> Vec<u32> {
    let mut rng = TestRng::with_seed(seed);
    let a = operands(&mut rng, ZOO_THREADS);
    let b = operands(&mut rng, ZOO_THREADS);
    let c = rng.uniform(ZOO_THREADS, -std::f32::consts::PI, std::f32::consts::PI);
    (0..ZOO_THREADS).flat_map(|t| [a[t], b[t], c[t].to_bits()]).collect()
}

/// The zoo's results on `rig` (loaded with [`zoo_ptx`]) for `input`.
fn zoo_outputs<R: Rig>(rig: &R, input: &[u32]) -> Vec<u32> {
    let dev = rig.dev();
    let din = dev.upload(input).unwrap();
    let out = dev.alloc::<u32>(ZOO_THREADS * ZOO.len()).unwrap();
    let config = LaunchConfig::linear((ZOO_THREADS / 256) as u32, 256);
    rig.launch("zoo", config, &[out.view().addr(), din.view().addr()]);
    dev.download(out.view()).unwrap()
}

/// The zoo always runs on the simulator (every op decodes and executes without a fault).
#[test]
fn instruction_zoo_runs_on_the_simulator() {
    let out = zoo_outputs(&SimRig::load(&zoo_ptx()), &zoo_inputs(TestRng::new().seed()));
    assert_eq!(out.len(), ZOO_THREADS * ZOO.len());
}

#[test]
fn instruction_zoo_agrees() {
    let Some((gpu, _)) = both() else { return };
    let seed = TestRng::new().seed();
    let input = zoo_inputs(seed);
    let (g, s) = (
        zoo_outputs(&GpuRig::load(gpu, &zoo_ptx()), &input),
        zoo_outputs(&SimRig::load(&zoo_ptx()), &input),
    );
    let mut failures = Vec::new();
    for (j, (op, check)) in ZOO.iter().enumerate() {
        let mut worst = 0f64;
        let mut bad = 0;
        for t in 0..ZOO_THREADS {
            let (gv, sv) = (g[t * ZOO.len() + j], s[t * ZOO.len() + j]);
            let ok = match *check {
                Check::Exact => gv == sv,
                Check::Approx { rel, abs } => {
                    let (gf, sf) = (f32::from_bits(gv) as f64, f32::from_bits(sv) as f64);
                    if gf.is_nan() || sf.is_nan() || gf.is_infinite() || sf.is_infinite() {
                        gf.is_nan() == sf.is_nan() && (gf.is_nan() || gf == sf)
                    } else {
                        let err = (gf - sf).abs();
                        worst = worst.max(if sf != 0.0 { err / sf.abs() } else { err });
                        err <= abs + rel * sf.abs()
                    }
                }
            };
            if !ok {
                bad += 1;
                if bad <= 3 {
                    let [a, b, c] = [input[3 * t], input[3 * t + 1], input[3 * t + 2]];
                    failures.push(format!(
                        "`{}` a={a:#010x} b={b:#010x} c={c:#010x} (thread {t}): gpu {gv:#010x} sim {sv:#010x}",
                        op.split(";\n").last().unwrap_or(op).trim()
                    ));
                }
            }
        }
        if let Check::Approx { .. } = check {
            eprintln!("sim_vs_gpu: `{}`: largest relative difference {worst:.3e}", op.trim());
        }
        if bad > 3 {
            failures.push(format!("  ... {bad} mismatches in total for op {j}"));
        }
    }
    assert!(
        failures.is_empty(),
        "zoo: simulator and GPU disagree (TEST_SEED={seed}):\n{}",
        failures.join("\n")
    );
    eprintln!(
        "sim_vs_gpu: {} zoo ops x {ZOO_THREADS} operand sets agree on {} (seed {seed})",
        ZOO.len(),
        gpu.describe()
    );
}
