//! The execution model: per-lane program counters, divergence and reconvergence, loops,
//! barriers, special registers, partial warps.

use crate::common::*;
use gpu_host::{GpuError, LaunchConfig};
use ptx_sim::{SimOptions, Simulator};

/// Stores `%r9` at `out[linear thread index]`.
const STORE_R9: &str =
    "\tmul.wide.u32 %rd30, %r0, 4;\n\tadd.s64 %rd31, %rd0, %rd30;\n\tst.global.u32 [%rd31], %r9;\n";

#[test]
fn lanes_reconverge_after_if_else() {
    let body = format!(
        "\tsetp.lt.u32 %p1, %r60, 16;\n\t@%p1 bra LOW;\n\tmov.u32 %r1, 200;\n\tbra.uni JOIN;\n\
         LOW:\n\tmov.u32 %r1, 100;\nJOIN:\n\tshfl.sync.idx.b32 %r2, %r1, 31, 0x1f, -1;\n\
         \tadd.s32 %r9, %r1, %r2;\n{STORE_R9}"
    );
    let got = run(&body, block(32), &[], 32).unwrap();
    assert_eq!(got, (0..32).map(|l| if l < 16 { 300 } else { 400 }).collect::<Vec<_>>());
}

#[test]
fn lanes_reconverge_when_a_branch_is_placed_after_the_join() {
    let body = format!(
        "\tsetp.lt.u32 %p1, %r60, 5;\n\t@%p1 bra FAR;\n\tmov.u32 %r1, 1;\nJOIN:\n\
         \tshfl.sync.bfly.b32 %r2, %r1, 1, 0x1f, -1;\n\tadd.s32 %r9, %r1, %r2;\n{STORE_R9}\tret;\n\
         FAR:\n\tmov.u32 %r1, 10;\n\tbra JOIN;\n"
    );
    let got = run(&body, block(32), &[], 32).unwrap();
    // lanes 0-3 pair among themselves (10+10), lane 4 pairs with lane 5 (10+1).
    let want: Vec<u32> = (0..32)
        .map(|l| {
            if l < 4 {
                20
            } else if l < 6 {
                11
            } else {
                2
            }
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn lanes_wait_for_the_longest_loop_before_a_collective() {
    let body = format!(
        "\tmov.u32 %r1, 0;\n\tmov.u32 %r2, 0;\nLOOP:\n\tadd.s32 %r1, %r1, %r2;\n\tadd.s32 %r2, %r2, 1;\n\
         \tsetp.le.u32 %p1, %r2, %r60;\n\t@%p1 bra LOOP;\n\
         \tshfl.sync.down.b32 %r9, %r1, 1, 0x1f, -1;\n{STORE_R9}"
    );
    let got = run(&body, block(32), &[], 32).unwrap();
    let tri = |l: u32| l * (l + 1) / 2;
    assert_eq!(got, (0..32).map(|l| tri((l + 1).min(31))).collect::<Vec<_>>());
}

#[test]
fn special_registers_in_three_dimensions() {
    let body = "\
\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %tid.y;\n\tmov.u32 %r3, %tid.z;\n\
\tmov.u32 %r4, %ctaid.x;\n\tmov.u32 %r5, %ctaid.y;\n\tmov.u32 %r6, %ntid.y;\n\tmov.u32 %r7, %nctaid.y;\n\
\tmov.u32 %r8, %warpid;\n\
\tshl.b32 %r2, %r2, 4;\n\tshl.b32 %r3, %r3, 8;\n\tshl.b32 %r4, %r4, 12;\n\tshl.b32 %r5, %r5, 16;\n\
\tshl.b32 %r6, %r6, 20;\n\tshl.b32 %r7, %r7, 24;\n\tshl.b32 %r8, %r8, 28;\n\
\tor.b32 %r9, %r1, %r2;\n\tor.b32 %r9, %r9, %r3;\n\tor.b32 %r9, %r9, %r4;\n\tor.b32 %r9, %r9, %r5;\n\
\tor.b32 %r9, %r9, %r6;\n\tor.b32 %r9, %r9, %r7;\n\tor.b32 %r9, %r9, %r8;\n\
\tmov.u32 %r10, %ntid.x;\n\tmov.u32 %r11, %ntid.y;\n\tmad.lo.u32 %r12, %r2, 0, 0;\n\
\tmov.u32 %r13, %tid.y;\n\tmov.u32 %r14, %tid.z;\n\tmad.lo.u32 %r15, %r14, %r11, %r13;\n\
\tmad.lo.u32 %r15, %r15, %r10, %r1;\n\
\tmov.u32 %r16, %ctaid.y;\n\tmov.u32 %r17, %nctaid.x;\n\tmov.u32 %r18, %ctaid.x;\n\
\tmad.lo.u32 %r19, %r16, %r17, %r18;\n\tmul.lo.u32 %r20, %r11, %r10;\n\tmov.u32 %r21, %ntid.z;\n\
\tmul.lo.u32 %r20, %r20, %r21;\n\tmad.lo.u32 %r22, %r19, %r20, %r15;\n\
\tmul.wide.u32 %rd30, %r22, 4;\n\tadd.s64 %rd31, %rd0, %rd30;\n\tst.global.u32 [%rd31], %r9;\n";
    let config = LaunchConfig { grid: (2, 3, 1), block: (8, 4, 2), shared_mem_bytes: 0 };
    let got = run(body, config, &[], 6 * 64).unwrap();
    let sequential = SimOptions { parallel_blocks: false, ..SimOptions::default() };
    assert_eq!(run_with(body, sequential, config, &[], 6 * 64).unwrap(), got);
    for (i, &v) in got.iter().enumerate() {
        let (block, t) = (i / 64, i % 64);
        let (bx, by) = (block % 2, block / 2);
        let (x, y, z) = (t % 8, (t / 8) % 4, t / 32);
        let want = x | y << 4 | z << 8 | bx << 12 | by << 16 | 4 << 20 | 3 << 24 | (t / 32) << 28;
        assert_eq!(v, want as u32, "element {i}");
    }
}

#[test]
fn lane_masks_and_partial_last_warp() {
    let body = format!(
        "\tmov.u32 %r1, %lanemask_lt;\n\tmov.u32 %r2, %warpid;\n\tsetp.eq.u32 %p1, %r2, 1;\n\
         \t@%p1 bra SECOND;\n\tmov.u32 %r9, %r1;\n{STORE_R9}\tret;\n\
         SECOND:\n\tshfl.sync.idx.b32 %r9, %r60, 7, 0x1f, 0xff;\n{STORE_R9}"
    );
    // 40 threads: warp 1 has lanes 0-7 only, and a collective over them works.
    let got = run(&body, block(40), &[], 40).unwrap();
    let want: Vec<u32> = (0..40).map(|t| if t < 32 { (1u32 << t) - 1 } else { 7 }).collect();
    assert_eq!(got, want);
}

#[test]
fn barriers_in_loops_and_after_early_exits() {
    // Threads >= 48 exit at once; the others accumulate smem[t] += t over 3 barrier-separated
    // rounds reading the neighbour's previous value.
    let body = format!(
        "\tsetp.ge.u32 %p1, %r0, 48;\n\t@%p1 bra DONE;\n\tmov.u32 %r1, smem;\n\tshl.b32 %r2, %r0, 2;\n\
         \tadd.s32 %r3, %r1, %r2;\n\tst.shared.u32 [%r3], %r0;\n\tmov.u32 %r4, 0;\n\tmov.u32 %r9, 0;\n\
         ROUND:\n\tbar.sync 0;\n\tadd.s32 %r5, %r0, 1;\n\trem.u32 %r5, %r5, 48;\n\tshl.b32 %r5, %r5, 2;\n\
         \tadd.s32 %r5, %r1, %r5;\n\tld.shared.u32 %r6, [%r5];\n\tadd.s32 %r9, %r9, %r6;\n\
         \tadd.s32 %r4, %r4, 1;\n\tsetp.lt.u32 %p2, %r4, 3;\n\t@%p2 bra ROUND;\n{STORE_R9}DONE:\n"
    );
    let config = LaunchConfig { shared_mem_bytes: 48 * 4, ..block(64) };
    let got = run(&body, config, &[], 64).unwrap();
    let want: Vec<u32> =
        (0..64).map(|t| if t < 48 { 3 * ((t + 1) % 48) } else { u32::MAX }).collect();
    assert_eq!(got, want);
}

/// `.maxntid` caps the threads of a launch and `.reqntid` fixes its block, as on a GPU (where
/// the launch fails): a launcher whose block disagrees with the entry's bounds is caught here.
#[test]
fn launches_respect_the_entrys_launch_bounds() {
    let with_bounds = |bounds: &str| {
        let ptx =
            kernel("\tst.global.u32 [%rd0], %r0;").replace("\n)\n{", &format!("\n)\n{bounds}\n{{"));
        Simulator::from_ptx(&ptx).unwrap()
    };
    let sim = with_bounds(".maxntid 64, 1, 1");
    run_on(&sim, block(64), &[], 1).unwrap();
    let err = run_on(&sim, block(96), &[], 1).unwrap_err();
    assert!(matches!(err, GpuError::InvalidArgument { arg: "block", .. }), "{err:?}");
    assert!(err.to_string().contains("96 threads per block exceed the entry's .maxntid of 64"));
    let sim = with_bounds(".reqntid 32");
    run_on(&sim, block(32), &[], 1).unwrap();
    let err = run_on(&sim, LaunchConfig { block: (16, 2, 1), ..block(32) }, &[], 1).unwrap_err();
    assert!(err.to_string().contains("is not the entry's .reqntid [32, 1, 1]"), "{err}");
}
