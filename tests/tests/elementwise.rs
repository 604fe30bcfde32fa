//! fill / add / scale / cast / TF32-rounding kernels against cpu-ref, bit for bit (all are exactly rounded;
//! NaNs, which `inf - inf` produces in the f16 tests, compare equal whatever their payload).

use cpu_ref::precision::Element;
use gpu_host::kernels::elementwise::{
    CastTo, FloatElement, add, add_assign, cast, fill, round_tf32, round_tf32_in_place, scale,
    scale_in_place,
};
use gpu_host::{Device, DeviceBuffer, DeviceElement, GpuError, LaunchConfig};
use half::{bf16, f16};
use integration_tests::{
    TestRng, alignment_cases, assert_bits_eq, assert_floats_eq, kernel_tests, poisoned, upload_at,
};
use kernel_abi::elementwise::{AddParams, BLOCK_THREADS, ElementwiseKernels};

/// Lengths around the 8-element vector chunk (every residue mod 8), a few blocks, and a long
/// odd length.
const LENGTHS: &[usize] = &[1, 7, 8, 9, 10, 12, 13, 14, 1000, 4099, 100_003];

/// Element offsets of the output view (fill): 0 keeps 16-byte alignment (vector path), 1
/// breaks it (scalar path). Kernels with inputs take [`alignment_cases`]: each buffer off
/// alone too.
const OFFSETS: &[usize] = &[0, 1];

/// Values spread over many binades (including f16 subnormals and f16 overflow), both signs.
fn spread<T: Element>(rng: &mut TestRng, n: usize) -> Vec<T> {
    let exps = rng.uniform(n, -30.0, 20.0);
    let mants = rng.uniform(n, -2.0, 2.0);
    exps.iter().zip(&mants).map(|(e, m)| T::from_f32(m * e.exp2())).collect()
}

fn poison<T: DeviceElement>() -> T {
    let mut v = T::zeroed();
    bytemuck::bytes_of_mut(&mut v).fill(0xff);
    v
}

/// Runs `launch(out window)` on a poisoned buffer of `offset + n` elements and returns what
/// the device holds afterwards.
fn run_into<D: Device, T: DeviceElement>(
    dev: &D,
    n: usize,
    offset: usize,
    launch: impl FnOnce(gpu_host::DeviceViewMut<'_, T>) -> Result<(), GpuError>,
) -> Vec<T> {
    let mut out = poisoned::<D, T>(dev, offset + n).expect("alloc");
    launch(out.view_mut().slice_mut(offset..offset + n).expect("window")).expect("launch");
    dev.download(out.view()).expect("download")
}

fn check_fill<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for &n in LENGTHS {
        for &offset in OFFSETS {
            let value = T::from_f32(rng.scalar(-3.0, 3.0));
            let got = run_into(dev, n, offset, |out| fill(dev, out, value));
            let mut want = vec![poison::<T>(); offset + n];
            cpu_ref::elementwise::fill(&mut want[offset..], value);
            assert_bits_eq(
                &format!("fill_{} n={n} offset={offset}", <T as DeviceElement>::NAME),
                rng.seed(),
                &got,
                &want,
            );
        }
    }
}

fn check_add<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for &n in LENGTHS {
        for [o_a, o_b, offset] in alignment_cases() {
            let (a, b) = (spread::<T>(&mut rng, n), spread::<T>(&mut rng, n));
            let (da, db) = (upload_at(dev, &a, o_a).unwrap(), upload_at(dev, &b, o_b).unwrap());
            let (va, vb) =
                (da.view().slice(o_a..o_a + n).unwrap(), db.view().slice(o_b..o_b + n).unwrap());
            let got = run_into(dev, n, offset, |out| add(dev, va, vb, out));
            let mut want = vec![poison::<T>(); offset + n];
            cpu_ref::elementwise::add(&a, &b, &mut want[offset..]);
            assert_floats_eq(
                &format!(
                    "add_{} n={n} offsets a={o_a} b={o_b} out={offset}",
                    <T as DeviceElement>::NAME
                ),
                rng.seed(),
                &got,
                &want,
            );

            // In place: acc += b, with acc where a was.
            let mut acc = upload_at(dev, &a, o_a).unwrap();
            add_assign(dev, acc.view_mut().slice_mut(o_a..o_a + n).unwrap(), vb).unwrap();
            let got = dev.download(acc.view().slice(o_a..o_a + n).unwrap()).unwrap();
            assert_floats_eq(
                &format!(
                    "add_assign_{} n={n} offsets acc={o_a} b={o_b}",
                    <T as DeviceElement>::NAME
                ),
                rng.seed(),
                &got,
                &want[offset..],
            );
        }
    }
}

fn check_scale<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for &n in LENGTHS {
        for [o_x, offset] in alignment_cases() {
            let x = spread::<T>(&mut rng, n);
            let alpha = rng.scalar(-2.0, 2.0);
            let dx = upload_at(dev, &x, o_x).unwrap();
            let vx = dx.view().slice(o_x..o_x + n).unwrap();
            let got = run_into(dev, n, offset, |out| scale(dev, vx, alpha, out));
            let mut want = vec![poison::<T>(); offset + n];
            cpu_ref::elementwise::scale(&x, alpha, &mut want[offset..]);
            assert_floats_eq(
                &format!("scale_{} n={n} offsets x={o_x} out={offset}", <T as DeviceElement>::NAME),
                rng.seed(),
                &got,
                &want,
            );

            let mut inplace = upload_at(dev, &x, o_x).unwrap();
            scale_in_place(dev, inplace.view_mut().slice_mut(o_x..o_x + n).unwrap(), alpha)
                .unwrap();
            let got = dev.download(inplace.view().slice(o_x..o_x + n).unwrap()).unwrap();
            assert_floats_eq(
                &format!("scale_in_place_{} n={n}", <T as DeviceElement>::NAME),
                rng.seed(),
                &got,
                &want[offset..],
            );
        }
    }
}

fn check_cast<S: CastTo<T> + Element, T: DeviceElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for &n in LENGTHS {
        for [o_src, offset] in alignment_cases() {
            let src = spread::<S>(&mut rng, n);
            let dsrc = upload_at(dev, &src, o_src).unwrap();
            let vsrc = dsrc.view().slice(o_src..o_src + n).unwrap();
            let got = run_into(dev, n, offset, |out| cast(dev, vsrc, out));
            let mut want = vec![poison::<T>(); offset + n];
            cpu_ref::elementwise::cast(&src, &mut want[offset..]);
            let what = format!(
                "cast_{}_{} n={n} offsets src={o_src} out={offset}",
                <S as DeviceElement>::NAME,
                <T as DeviceElement>::NAME
            );
            assert_floats_eq(&what, rng.seed(), &got, &want);
        }
    }
}

/// `round_tf32` against cpu-ref bit for bit, NaN payloads included: random values over many
/// binades, and at the start of each input the cases a wrong rounding rule gets wrong (exact
/// ties, which go away from zero; one below a tie; a carry into the exponent; the largest f32,
/// which becomes infinity; infinities, NaNs with payloads above and within the low 13 bits,
/// zeros, subnormals). Both alignment paths and every residue of the
/// 8-element chunk; out of place and in place.
fn check_round_tf32(dev: &impl Device) {
    let mut rng = TestRng::new();
    let one = 1.0f32.to_bits();
    let special = [
        f32::from_bits(one + (1 << 12)),
        -f32::from_bits(one + (3 << 12)),
        f32::from_bits(one + (1 << 12) - 1),
        f32::from_bits(0x3fff_f000),
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7fff_ffff),
        f32::from_bits(0xffc0_1fff),
        f32::from_bits(0x7f80_0001),
        -0.0,
        f32::from_bits(0x0000_1fff),
        f32::from_bits(0x8000_3000),
    ];
    for &n in LENGTHS {
        for [o_src, offset] in alignment_cases() {
            let mut src = spread::<f32>(&mut rng, n);
            let k = special.len().min(n);
            src[..k].copy_from_slice(&special[..k]);
            let dsrc = upload_at(dev, &src, o_src).unwrap();
            let vsrc = dsrc.view().slice(o_src..o_src + n).unwrap();
            let got = run_into(dev, n, offset, |out| round_tf32(dev, vsrc, out));
            let mut want = vec![poison::<f32>(); offset + n];
            cpu_ref::elementwise::round_tf32(&src, &mut want[offset..]);
            let what = format!("round_tf32_f32 n={n} offsets src={o_src} out={offset}");
            assert_bits_eq(&what, rng.seed(), &got, &want);

            let mut inplace = upload_at(dev, &src, o_src).unwrap();
            round_tf32_in_place(dev, inplace.view_mut().slice_mut(o_src..o_src + n).unwrap())
                .unwrap();
            let got = dev.download(inplace.view().slice(o_src..o_src + n).unwrap()).unwrap();
            let what = format!("round_tf32_in_place n={n} offset={o_src}");
            assert_bits_eq(&what, rng.seed(), &got, &want[offset..]);
        }
    }
}

/// The grid-stride loop that every elementwise and GELU kernel shares, on a grid of 3 blocks
/// (768 threads) for up to 10,003 elements: the launchers cap the grid at `MAX_BLOCKS`, which
/// only 134 M elements reach, so here the kernel is launched directly with a small grid; both
/// the vector body (1250 chunks) and the scalar path take several strides per thread.
fn check_grid_stride<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    let n = 10_003;
    for offset in [0, 1] {
        let (a, b) = (spread::<T>(&mut rng, n), spread::<T>(&mut rng, n));
        let (da, db) = (upload_at(dev, &a, offset).unwrap(), upload_at(dev, &b, offset).unwrap());
        let mut out = poisoned::<_, T>(dev, offset + n).unwrap();
        let window = offset..offset + n;
        let params = AddParams {
            a: da.view().slice(window.clone()).unwrap().ptr(),
            b: db.view().slice(window.clone()).unwrap().ptr(),
            out: out.view_mut().slice_mut(window.clone()).unwrap().ptr(),
            n: n as u64,
        };
        let config = LaunchConfig::linear(3, BLOCK_THREADS);
        // SAFETY: the three views hold `n` elements each, as the parameters say; the kernel
        // reads and writes only those.
        unsafe { dev.launch(<T as DeviceElement>::Abi::ADD, config, params) }.unwrap();
        let got = dev.download(out.view().slice(window).unwrap()).unwrap();
        let mut want = vec![poison::<T>(); n];
        cpu_ref::elementwise::add(&a, &b, &mut want);
        let what = format!("add_{} grid-stride offset={offset}", <T as DeviceElement>::NAME);
        assert_floats_eq(&what, rng.seed(), &got, &want);
    }
}

/// Mismatched lengths are rejected before launch, naming the argument; so is TF32 rounding of
/// bf16.
fn check_length_errors(dev: &impl Device) {
    let a = dev.upload(&[1.0f32; 10]).unwrap();
    let mut out = dev.alloc::<f32>(12).unwrap();
    let err = add(dev, a.view(), a.view(), out.view_mut()).unwrap_err();
    assert!(
        matches!(&err, GpuError::InvalidArgument { op: "add", arg: "a", .. }),
        "unexpected error: {err}"
    );
    let mut half_out = dev.alloc::<bf16>(9).unwrap();
    let err = cast(dev, a.view(), half_out.view_mut()).unwrap_err();
    assert!(err.to_string().contains("cast: invalid `src`"), "unexpected error: {err}");
    let err = <bf16 as FloatElement>::round_tf32_in_place(dev, half_out.view_mut()).unwrap_err();
    assert!(
        err.to_string().contains("TF32 rounding takes f32, not bf16"),
        "unexpected error: {err}"
    );
}

kernel_tests! {
    fill_f32 => check_fill::<f32>;
    fill_bf16 => check_fill::<bf16>;
    fill_f16 => check_fill::<f16>;
    add_f32 => check_add::<f32>;
    add_bf16 => check_add::<bf16>;
    add_f16 => check_add::<f16>;
    scale_f32 => check_scale::<f32>;
    scale_bf16 => check_scale::<bf16>;
    scale_f16 => check_scale::<f16>;
    cast_f32_bf16 => check_cast::<f32, bf16>;
    cast_bf16_f32 => check_cast::<bf16, f32>;
    cast_f32_f16 => check_cast::<f32, f16>;
    cast_f16_f32 => check_cast::<f16, f32>;
    round_tf32_f32 => check_round_tf32;
    length_errors => check_length_errors;
    grid_stride_f32 => check_grid_stride::<f32>;
    grid_stride_bf16 => check_grid_stride::<bf16>;
}

/// Programmatic dependent launch (`gpu_host::PDL_ENV`, `Gpu::set_programmatic_launch`) on a
/// GPU that runs the sm_90a module: a chain of 300 kernels over 4M f32, each reading what the
/// one before it wrote (`y = 1.0001·x`, then `x = y + b`, 150 times), gives the f32 chain the
/// CPU computes, bit for bit. A kernel that read before its `griddepcontrol.wait` could see its
/// predecessor's output half written. Skipped without such a GPU (the simulator runs launches
/// in order: nothing to test there).
#[test]
fn programmatic_dependent_launch_keeps_a_chain_in_order() {
    let Some(shared) = integration_tests::gpu() else { return };
    if shared.ptx_arch() != gpu_host::PtxArch::Sm90a {
        return;
    }
    let mut gpu = gpu_host::Gpu::new().unwrap();
    gpu.set_programmatic_launch(true).unwrap();
    assert!(gpu.describe().contains("programmatic dependent launch"), "{}", gpu.describe());
    let (n, rounds, alpha) = (1 << 22, 150, 1.0001f32);
    let mut rng = TestRng::new();
    let (x0, b) = (rng.uniform(n, -1.0, 1.0), rng.uniform(n, -1.0, 1.0));
    let (mut x, mut y, b_dev) =
        (gpu.upload(&x0).unwrap(), gpu.alloc::<f32>(n).unwrap(), gpu.upload(&b).unwrap());
    for _ in 0..rounds {
        scale(&gpu, x.view(), alpha, y.view_mut()).unwrap();
        add(&gpu, y.view(), b_dev.view(), x.view_mut()).unwrap();
    }
    let got = gpu.download(x.view()).unwrap();
    let want: Vec<f32> =
        x0.iter().zip(&b).map(|(&x, &b)| (0..rounds).fold(x, |x, _| alpha * x + b)).collect();
    assert_bits_eq("scale/add chain under PDL", rng.seed(), &got, &want);
}
