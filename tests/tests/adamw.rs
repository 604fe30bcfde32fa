//! One-launch AdamW over a parameter arena against `cpu_ref::adamw_update_arena`, bit for
//! bit: every gradient type, bf16/f16/no working copy, nearest-even and stochastic rounding,
//! tensors on the vector and the scalar path, gaps, unaligned views, argument checks.

use cpu_ref::precision::Element;
use cpu_ref::{AdamWArena, AdamWStep, ArenaTensor};
use gpu_host::kernels::adamw::{
    AdamWBuffers, AdamWHyper, AdamWTable, AdamWTensor, WorkingElement, WorkingRounding, adamw,
    bias_corrections,
};
use gpu_host::{Device, DeviceBuffer, DeviceElement, DeviceView, DeviceViewMut, GpuError};
use half::{bf16, f16};
use integration_tests::{TestRng, assert_bits_eq, kernel_tests, poisoned, small_sizes, upload_at};
use kernel_abi::adamw::AdamWKernel;
use std::ops::Range;

/// Tensors as (offset, length) on the simulator: every residue class of the length mod 8;
/// offsets that are multiples of 8 (vector path, scalar tail) except 7117 and 11557 (scalar
/// path); gaps between some tensors (never touched).
const SIM_LAYOUT: &[(u64, u32)] = &[
    (0, 2000),
    (2000, 1001),
    (3008, 7),
    (3016, 4098),
    (7117, 4099),
    (11_216, 12),
    (11_232, 325),
    (11_557, 6),
    (11_568, 12_346),
    (23_917, 1),
];

/// One tensor longer than a full grid row (1024 blocks · 2048 elements): several
/// grid-stride iterations per thread.
const LONG_LAYOUT: &[(u64, u32)] = &[(0, 2_200_001), (2_200_008, 13)];

/// GPT-2 124M (llm.c order, Vp = 50304, L = 12, C = 768, maxT = 1024), contiguous.
fn gpt2_124m_layout() -> Vec<(u64, u32)> {
    let (vp, l, c, t) = (50_304u32, 12u32, 768u32, 1024u32);
    let lens = [
        vp * c,
        t * c,
        l * c,
        l * c,
        l * 3 * c * c,
        l * 3 * c,
        l * c * c,
        l * c,
        l * c,
        l * c,
        l * 4 * c * c,
        l * 4 * c,
        l * 4 * c * c,
        l * c,
        c,
        c,
    ];
    let mut offset = 0;
    let layout = lens
        .into_iter()
        .map(|len| {
            offset += u64::from(len);
            (offset - u64::from(len), len)
        })
        .collect();
    assert_eq!(offset, 124_475_904);
    layout
}

/// Small tensors on the simulator, GPT-2 124M on a GPU.
fn layout(dev: &impl Device) -> Vec<(u64, u32)> {
    if small_sizes(dev) { SIM_LAYOUT.to_vec() } else { gpt2_124m_layout() }
}

/// The table of a layout, with a random decay per tensor (zero for every third), and the
/// arena length (5 elements past the last tensor, never touched).
fn table(rng: &mut TestRng, layout: &[(u64, u32)]) -> (Vec<AdamWTensor>, usize) {
    let tensors: Vec<AdamWTensor> = layout
        .iter()
        .enumerate()
        .map(|(i, &(offset, len))| {
            let weight_decay = if i % 3 == 2 { 0.0 } else { rng.scalar(0.01, 0.3) };
            AdamWTensor { offset, len, weight_decay }
        })
        .collect();
    let end = tensors.last().map_or(0, |t| t.offset + u64::from(t.len));
    (tensors, end as usize + 5)
}

/// The state of one update: master weights, gradients, moments.
struct State<G> {
    params: Vec<f32>,
    grads: Vec<G>,
    m: Vec<f32>,
    v: Vec<f32>,
}

impl<G: Element> State<G> {
    fn random(rng: &mut TestRng, n: usize) -> Self {
        let grads = rng.uniform(n, -2.0, 2.0).into_iter().map(G::from_f32).collect();
        let v = rng.uniform(n, 1e-6, 1e-2);
        Self { params: rng.uniform(n, -1.0, 1.0), grads, m: rng.uniform(n, -0.1, 0.1), v }
    }
}

fn hyper(rng: &mut TestRng, rounding: WorkingRounding) -> AdamWHyper {
    AdamWHyper {
        lr: rng.scalar(1e-4, 1e-2),
        beta1: rng.scalar(0.8, 0.95),
        beta2: rng.scalar(0.9, 0.999),
        eps: 1e-8,
        t: rng.scalar(1.0, 100.0) as u32,
        grad_scale: rng.scalar(0.1, 2.0),
        rounding,
    }
}

/// The result of one update: master weights, moments, working copy (poison where unwritten).
type Outcome<W> = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<W>);

fn reference<G: Element, W: Element + DeviceElement>(
    s: &State<G>,
    tensors: &[AdamWTensor],
    h: &AdamWHyper,
    with_working: bool,
) -> Outcome<W> {
    let (mut params, mut m, mut v) = (s.params.clone(), s.m.clone(), s.v.clone());
    let mut working = vec![poison::<W>(); s.params.len()];
    let arena = AdamWArena {
        params: &mut params,
        grads: &s.grads,
        m: &mut m,
        v: &mut v,
        working: with_working.then_some(&mut working[..]),
    };
    let tensors: Vec<ArenaTensor> = tensors
        .iter()
        .map(|t| ArenaTensor {
            offset: t.offset as usize,
            len: t.len as usize,
            weight_decay: t.weight_decay,
        })
        .collect();
    let step = AdamWStep {
        lr: h.lr,
        beta1: h.beta1,
        beta2: h.beta2,
        eps: h.eps,
        weight_decay: f32::NAN,
        t: h.t,
        grad_scale: h.grad_scale,
    };
    let rounding = match h.rounding {
        WorkingRounding::NearestEven => cpu_ref::WorkingRounding::NearestEven,
        WorkingRounding::Stochastic { seed } => cpu_ref::WorkingRounding::Stochastic { seed },
    };
    cpu_ref::adamw_update_arena(arena, &tensors, &step, rounding);
    (params, m, v, working)
}

fn poison<T: DeviceElement>() -> T {
    let mut v = T::zeroed();
    bytemuck::bytes_of_mut(&mut v).fill(0xff);
    v
}

/// Runs the kernel on `s` with every view at element `offset` of its buffer.
fn run<D: Device, G, W: WorkingElement>(
    dev: &D,
    table: &AdamWTable<D>,
    s: &State<G>,
    h: &AdamWHyper,
    with_working: bool,
    offset: usize,
) -> Outcome<W>
where
    G: DeviceElement<Abi: AdamWKernel<W::Abi>>,
{
    let n = s.params.len();
    let window = offset..offset + n;
    let mut params = upload_at(dev, &s.params, offset).unwrap();
    let grads = upload_at(dev, &s.grads, offset).unwrap();
    let mut m = upload_at(dev, &s.m, offset).unwrap();
    let mut v = upload_at(dev, &s.v, offset).unwrap();
    let mut working = poisoned::<D, W>(dev, offset + n).unwrap();
    let bufs = AdamWBuffers {
        params: params.view_mut().slice_mut(window.clone()).unwrap(),
        grads: grads.view().slice(window.clone()).unwrap(),
        m: m.view_mut().slice_mut(window.clone()).unwrap(),
        v: v.view_mut().slice_mut(window.clone()).unwrap(),
        working: with_working.then(|| working.view_mut().slice_mut(window.clone()).unwrap()),
    };
    adamw(dev, table, bufs, h).unwrap();
    (
        download_window(dev, params.view(), &window),
        download_window(dev, m.view(), &window),
        download_window(dev, v.view(), &window),
        download_window(dev, working.view(), &window),
    )
}

fn download_window<D: Device, T: DeviceElement>(
    dev: &D,
    view: DeviceView<'_, T>,
    window: &Range<usize>,
) -> Vec<T> {
    dev.download(view.slice(window.clone()).unwrap()).unwrap()
}

fn compare<W: DeviceElement>(what: &str, seed: u64, got: &Outcome<W>, want: &Outcome<W>) {
    assert_bits_eq(&format!("{what} params"), seed, &got.0, &want.0);
    assert_bits_eq(&format!("{what} m"), seed, &got.1, &want.1);
    assert_bits_eq(&format!("{what} v"), seed, &got.2, &want.2);
    assert_bits_eq(&format!("{what} working"), seed, &got.3, &want.3);
}

/// Every rounding the working type has, with and without a working copy, at view offsets 0
/// (aligned), 1 (every tensor on the scalar path) and 4 (the f32 buffers 16-byte aligned, the
/// 16-bit ones 8 bytes off: the vector path needs each buffer's alignment tested), on the small
/// layout; on a GPU also GPT-2 124M's table once (nearest-even, working copy, aligned). Every
/// case of the full table on the CPU reference took about three minutes per test on the H200's
/// machine (2026-11-26), past the bundle's limit per test binary.
fn check_adamw<G, W>(dev: &impl Device)
where
    G: DeviceElement<Abi: AdamWKernel<W::Abi>> + Element,
    W: WorkingElement + Element,
{
    let mut rng = TestRng::new();
    let mut cases =
        vec![(WorkingRounding::NearestEven, true), (WorkingRounding::NearestEven, false)];
    if W::STOCHASTIC_ROUNDING {
        let seed = rng.scalar(0.0, 1e9) as u32;
        cases.push((WorkingRounding::Stochastic { seed }, true));
    }
    let small: Vec<_> = cases
        .into_iter()
        .flat_map(|(rounding, with_working)| {
            [0, 1, 4].map(|offset| (rounding, with_working, offset))
        })
        .collect();
    let mut layouts = vec![(SIM_LAYOUT.to_vec(), small)];
    if !small_sizes(dev) {
        layouts.push((gpt2_124m_layout(), vec![(WorkingRounding::NearestEven, true, 0)]));
    }
    for (layout, cases) in layouts {
        let (tensors, arena_len) = table(&mut rng, &layout);
        let table = AdamWTable::new(dev, &tensors, arena_len).unwrap();
        for (rounding, with_working, offset) in cases {
            let s = State::<G>::random(&mut rng, arena_len);
            let h = hyper(&mut rng, rounding);
            let got = run::<_, G, W>(dev, &table, &s, &h, with_working, offset);
            let want = reference::<G, W>(&s, &tensors, &h, with_working);
            let what = format!(
                "adamw_{}_{} {rounding:?} working={with_working} offset={offset} t={} \
                 arena={arena_len}",
                <G as Element>::NAME,
                <W as Element>::NAME,
                h.t
            );
            compare(&what, rng.seed(), &got, &want);
        }
    }
}

/// Several grid-stride iterations per thread, against the reference.
fn check_long_tensor(dev: &impl Device) {
    let mut rng = TestRng::new();
    let (tensors, arena_len) = table(&mut rng, LONG_LAYOUT);
    let table = AdamWTable::new(dev, &tensors, arena_len).unwrap();
    let s = State::<bf16>::random(&mut rng, arena_len);
    let seed = rng.scalar(0.0, 1e9) as u32;
    let h = hyper(&mut rng, WorkingRounding::Stochastic { seed });
    let got = run::<_, bf16, bf16>(dev, &table, &s, &h, true, 0);
    let want = reference::<bf16, bf16>(&s, &tensors, &h, true);
    compare("adamw long tensor", rng.seed(), &got, &want);
}

/// Two launches from the same state give the same bits, stochastic rounding included.
fn check_deterministic(dev: &impl Device) {
    let mut rng = TestRng::new();
    let (tensors, arena_len) = table(&mut rng, &layout(dev));
    let table = AdamWTable::new(dev, &tensors, arena_len).unwrap();
    let s = State::<bf16>::random(&mut rng, arena_len);
    let h = hyper(&mut rng, WorkingRounding::Stochastic { seed: 12345 });
    let first = run::<_, bf16, bf16>(dev, &table, &s, &h, true, 0);
    let second = run::<_, bf16, bf16>(dev, &table, &s, &h, true, 0);
    compare("adamw twice", rng.seed(), &second, &first);
}

/// The launcher's bias corrections are cpu-ref's, bit for bit.
fn check_bias_corrections(_dev: &impl Device) {
    for t in [1, 2, 3, 10, 1000, 100_000] {
        let step = AdamWStep {
            lr: 0.0,
            beta1: 0.9,
            beta2: 0.95,
            eps: 0.0,
            weight_decay: 0.0,
            t,
            grad_scale: 1.0,
        };
        assert_eq!(bias_corrections(0.9, 0.95, t), step.bias_corrections(), "t={t}");
    }
}

fn expect_invalid<T>(result: Result<T, GpuError>, op: &str, arg: &str) {
    match result {
        Err(GpuError::InvalidArgument { op: o, arg: a, .. }) if o == op && a == arg => {}
        Err(e) => panic!("expected {op}: invalid `{arg}`, got {e}"),
        Ok(_) => panic!("expected {op}: invalid `{arg}`, got Ok"),
    }
}

fn check_bad_arguments(dev: &impl Device) {
    let entry = |offset, len| AdamWTensor { offset, len, weight_decay: 0.1 };
    // The last: an offset whose end wraps past 2^64 to 8, inside the arena if unchecked.
    let bad_tables: [&[AdamWTensor]; 5] = [
        &[],
        &[entry(10, 5), entry(0, 5)],
        &[entry(0, 6), entry(5, 5)],
        &[entry(0, 5), entry(10, 91)],
        &[entry(u64::MAX - 7, 16)],
    ];
    for entries in bad_tables {
        expect_invalid(AdamWTable::new(dev, entries, 100), "adamw_table", "tensors");
    }
    let nan_decay = [AdamWTensor { offset: 0, len: 5, weight_decay: f32::NAN }];
    expect_invalid(AdamWTable::new(dev, &nan_decay, 100), "adamw_table", "tensors");

    let table = AdamWTable::new(dev, &[entry(0, 50), entry(56, 44)], 100).unwrap();
    let (mut p, mut m, mut v) =
        (dev.alloc::<f32>(100).unwrap(), dev.alloc(100).unwrap(), dev.alloc(100).unwrap());
    let g = dev.alloc::<f16>(100).unwrap();
    let mut short = dev.alloc::<f32>(99).unwrap();
    let mut w = dev.alloc::<f16>(100).unwrap();
    let h = AdamWHyper {
        lr: 1e-3,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        t: 1,
        grad_scale: 1.0,
        rounding: WorkingRounding::NearestEven,
    };
    let bufs = AdamWBuffers {
        params: p.view_mut(),
        grads: g.view(),
        m: short.view_mut(),
        v: v.view_mut(),
        working: None::<DeviceViewMut<'_, bf16>>,
    };
    expect_invalid(adamw(dev, &table, bufs, &h), "adamw", "m");
    let bufs = AdamWBuffers {
        params: p.view_mut(),
        grads: g.view(),
        m: m.view_mut(),
        v: v.view_mut(),
        working: Some(w.view_mut()),
    };
    let sr = AdamWHyper { rounding: WorkingRounding::Stochastic { seed: 1 }, ..h };
    expect_invalid(adamw(dev, &table, bufs, &sr), "adamw", "rounding");
    let bufs = AdamWBuffers {
        params: p.view_mut(),
        grads: g.view(),
        m: m.view_mut(),
        v: v.view_mut(),
        working: Some(w.view_mut()),
    };
    expect_invalid(adamw(dev, &table, bufs, &AdamWHyper { t: 0, ..h }), "adamw", "t");
}

kernel_tests! {
    adamw_f32_bf16 => check_adamw::<f32, bf16>;
    adamw_f32_f16 => check_adamw::<f32, f16>;
    adamw_bf16_bf16 => check_adamw::<bf16, bf16>;
    adamw_bf16_f16 => check_adamw::<bf16, f16>;
    adamw_f16_bf16 => check_adamw::<f16, bf16>;
    adamw_f16_f16 => check_adamw::<f16, f16>;
    adamw_long_tensor => check_long_tensor;
    adamw_deterministic => check_deterministic;
    adamw_bias_corrections => check_bias_corrections;
    adamw_bad_arguments => check_bad_arguments;
}
