//! `transpose_f32` against cpu-ref bit for bit (NaN payloads aside), exact and rounding to
//! TF32: shapes around the 32 × 32 tile (every partial-tile case, single rows and columns), the
//! grid-stride walk over more tiles than blocks, and bad arguments.

use gpu_host::kernels::transpose::{TransposeRounding, transpose};
use gpu_host::{Device, DeviceBuffer, GpuError, LaunchConfig};
use integration_tests::{TestRng, assert_floats_eq, kernel_tests, poisoned};
use kernel_abi::transpose::{BLOCK_THREADS, SHARED_BYTES, TRANSPOSE_F32, TransposeParams};

/// (rows, cols): one element; a tile; one row or column short of and past it; tall and wide
/// strips; several tiles with partial edges in both dimensions.
const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (32, 32),
    (31, 33),
    (33, 31),
    (1, 1000),
    (1000, 1),
    (7, 100),
    (100, 7),
    (96, 64),
    (129, 95),
];

/// Values over many binades with, at the start, the cases TF32 rounding must get right (a tie,
/// which goes away from zero; one below it; the largest f32, which becomes infinity; NaN).
fn values(rng: &mut TestRng, n: usize) -> Vec<f32> {
    let exps = rng.uniform(n, -30.0, 20.0);
    let mants = rng.uniform(n, -2.0, 2.0);
    let mut v: Vec<f32> = exps.iter().zip(&mants).map(|(e, m)| m * e.exp2()).collect();
    let one = 1.0f32.to_bits();
    let special = [
        f32::from_bits(one + (1 << 12)),
        f32::from_bits(one + (1 << 12) - 1),
        f32::MAX,
        f32::NAN,
        -f32::INFINITY,
    ];
    let k = special.len().min(n);
    v[..k].copy_from_slice(&special[..k]);
    v
}

fn reference(src: &[f32], (rows, cols): (usize, usize), rounding: TransposeRounding) -> Vec<f32> {
    let mut want = vec![0.0; rows * cols];
    cpu_ref::elementwise::transpose(src, rows, cols, &mut want);
    if rounding == TransposeRounding::Tf32 {
        want = want.into_iter().map(cpu_ref::precision::round_tf32).collect();
    }
    want
}

fn check_shapes(dev: &impl Device) {
    let mut rng = TestRng::new();
    for &(rows, cols) in SHAPES {
        for rounding in [TransposeRounding::Exact, TransposeRounding::Tf32] {
            let src = values(&mut rng, rows * cols);
            let dsrc = dev.upload(&src).unwrap();
            let mut out = poisoned::<_, f32>(dev, rows * cols).unwrap();
            transpose(dev, dsrc.view(), (rows, cols), out.view_mut(), rounding).unwrap();
            let got = dev.download(out.view()).unwrap();
            let what = format!("transpose {rows}×{cols} {rounding:?}");
            assert_floats_eq(&what, rng.seed(), &got, &reference(&src, (rows, cols), rounding));
        }
    }
}

/// 3 blocks over the 5 × 4 tiles of a 150 × 100 matrix: every block takes several tiles, and
/// its barriers keep one tile's reads from the next tile's writes.
fn check_grid_stride(dev: &impl Device) {
    let mut rng = TestRng::new();
    let (rows, cols) = (150, 100);
    let src = values(&mut rng, rows * cols);
    let dsrc = dev.upload(&src).unwrap();
    let mut out = poisoned::<_, f32>(dev, rows * cols).unwrap();
    let params = TransposeParams {
        src: dsrc.view().ptr(),
        dst: out.view_mut().ptr(),
        rows: rows as u32,
        cols: cols as u32,
        round_tf32: 0,
    };
    let config = LaunchConfig {
        grid: (3, 1, 1),
        block: (BLOCK_THREADS, 1, 1),
        shared_mem_bytes: SHARED_BYTES,
    };
    // SAFETY: both buffers hold rows · cols elements, as the parameters say, and are distinct
    // allocations; block shape and shared memory are the kernel's.
    unsafe { dev.launch(TRANSPOSE_F32, config, params) }.unwrap();
    let got = dev.download(out.view()).unwrap();
    let want = reference(&src, (rows, cols), TransposeRounding::Exact);
    assert_floats_eq("transpose grid-stride", rng.seed(), &got, &want);
}

/// Lengths that do not match the shape are refused before launch, naming the argument.
fn check_errors(dev: &impl Device) {
    let src = dev.upload(&[1.0f32; 12]).unwrap();
    let mut dst = dev.alloc::<f32>(12).unwrap();
    let exact = TransposeRounding::Exact;
    let err = transpose(dev, src.view(), (3, 5), dst.view_mut(), exact).unwrap_err();
    assert!(
        matches!(&err, GpuError::InvalidArgument { op: "transpose", arg: "src", .. }),
        "unexpected error: {err}"
    );
    let mut short = dev.alloc::<f32>(11).unwrap();
    let err = transpose(dev, src.view(), (3, 4), short.view_mut(), exact).unwrap_err();
    assert!(matches!(&err, GpuError::InvalidArgument { arg: "dst", .. }), "{err}");
    transpose(
        dev,
        src.view().slice(0..0).unwrap(),
        (0, 4),
        short.view_mut().slice_mut(0..0).unwrap(),
        exact,
    )
    .unwrap();
}

kernel_tests! {
    transpose_shapes => check_shapes;
    transpose_grid_stride => check_grid_stride;
    transpose_errors => check_errors;
}
