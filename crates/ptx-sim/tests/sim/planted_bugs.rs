//! Planted bugs: each check of the simulator fires, and its message names the kernel, block,
//! thread, PTX line, instruction and address.

use crate::common::*;
use gpu_host::{Device, DeviceBuffer, LaunchConfig, SimErrorKind};
use ptx_sim::{SimOptions, Simulator};

const STORE_R9: &str =
    "\tmul.wide.u32 %rd30, %r0, 4;\n\tadd.s64 %rd31, %rd0, %rd30;\n\tst.global.u32 [%rd31], %r9;\n";

fn line(offset: u32) -> String {
    format!("PTX line {}", BODY_LINE + offset)
}

fn smem(bytes: u32, threads: u32) -> LaunchConfig {
    LaunchConfig { shared_mem_bytes: bytes, ..block(threads) }
}

#[test]
fn out_of_bounds_global_store_one_past_the_end() {
    // 32 threads store out[tid], but `out` holds 31 words.
    let body = format!("\tmov.u32 %r9, 1;\n{STORE_R9}");
    let msg = expect_err(
        run(&body, block(32), &[], 31),
        SimErrorKind::OutOfBounds,
        &[
            "global store of 4 bytes",
            "0 bytes past the end of allocation",
            "kernel `k`",
            "block (0,0,0)",
            "thread (31,0,0) (warp 0, lane 31)",
            &line(3),
            "`st.global.u32 [%rd31], %r9;`",
        ],
    );
    assert!(msg.starts_with("global store of 4 bytes at 0x7f"), "{msg}");
}

#[test]
fn out_of_bounds_shared_accesses() {
    let body = "\tmov.u32 %r1, smem;\n\tld.shared.u32 %r2, [%r1+64];\n";
    expect_err(
        run(body, smem(64, 1), &[], 1),
        SimErrorKind::OutOfBounds,
        &[
            "shared load of 4 bytes at shared address 0x440",
            "[0x400, 0x440)",
            "0 bytes static, 64 dynamic",
            &line(1),
        ],
    );
    // A shared address computed without the base of the dynamic allocation.
    let body = "\tst.shared.u32 [%r60], 1;\n";
    expect_err(
        run(body, smem(64, 1), &[], 1),
        SimErrorKind::OutOfBounds,
        &["shared store", "address 0x0"],
    );
}

#[test]
fn missing_barrier_is_a_race_and_the_barrier_fixes_it() {
    // Thread t writes smem[t], then reads smem[(t + 1) % 64]: a race without bar.sync.
    let body = |barrier: &str| {
        format!(
            "\tmov.u32 %r1, smem;\n\tshl.b32 %r2, %r0, 2;\n\tadd.s32 %r3, %r1, %r2;\n\
             \tst.shared.u32 [%r3], %r0;\n{barrier}\tadd.s32 %r4, %r0, 1;\n\trem.u32 %r4, %r4, 64;\n\
             \tshl.b32 %r4, %r4, 2;\n\tadd.s32 %r4, %r1, %r4;\n\tld.shared.u32 %r9, [%r4];\n{STORE_R9}"
        )
    };
    expect_err(
        run(&body(""), smem(256, 64), &[], 64),
        SimErrorKind::SharedRace,
        &[
            "read-after-write race on shared byte 0x404",
            "thread (0,0,0)",
            "thread (1,0,0) wrote it at",
            &line(3),
            "`st.shared.u32 [%r3], %r0;`",
            "`ld.shared.u32 %r9, [%r4];`",
        ],
    );
    let got = run(&body("\tbar.sync 0;\n"), smem(256, 64), &[], 64).unwrap();
    assert_eq!(got, (0..64).map(|t| (t + 1) % 64).collect::<Vec<u32>>());
}

#[test]
fn lanes_of_one_warp_race_without_bar_warp_sync() {
    let body = format!(
        "\tmov.u32 %r1, smem;\n\tshl.b32 %r2, %r60, 2;\n\tadd.s32 %r3, %r1, %r2;\n\
         \tst.shared.u32 [%r3], %r60;\n\txor.b32 %r4, %r60, 1;\n\
         \tshl.b32 %r4, %r4, 2;\n\tadd.s32 %r4, %r1, %r4;\n\tld.shared.u32 %r9, [%r4];\n{STORE_R9}"
    );
    expect_err(
        run(&body, smem(128, 32), &[], 32),
        SimErrorKind::SharedRace,
        &["thread (1,0,0) wrote it"],
    );
}

#[test]
fn a_second_warp_overwriting_what_the_first_read_is_a_race() {
    // After a barrier, warp 0 reads smem[32..64) and warp 1 then overwrites it, with no
    // barrier between.
    let body = "\
\tmov.u32 %r1, smem;\n\tshl.b32 %r2, %r0, 2;\n\tadd.s32 %r3, %r1, %r2;\n\tst.shared.u32 [%r3], 0;\n\
\tbar.sync 0;\n\tmov.u32 %r5, %warpid;\n\tsetp.eq.u32 %p1, %r5, 1;\n\t@%p1 bra WRITER;\n\
\tld.shared.u32 %r6, [%r3+128];\n\tret;\nWRITER:\n\tst.shared.u32 [%r3], 1;\n";
    expect_err(
        run(body, smem(256, 64), &[], 1),
        SimErrorKind::SharedRace,
        &[
            "write-after-read race on shared byte 0x480",
            "thread (32,0,0)",
            "thread (0,0,0) read it",
            &line(8),
        ],
    );
}

#[test]
fn missing_cp_async_wait_reads_stale_data() {
    // smem is zeroed, then cp.async copies 16 input bytes in; reading without a wait sees
    // the zeros (stale); with the hazard check on, the read is reported.
    let body = |wait: &str| {
        format!(
            "\tmov.u32 %r1, smem;\n\tst.shared.v4.u32 [%r1], {{0, 0, 0, 0}};\n\tbar.sync 0;\n\
             \tcp.async.cg.shared.global [%r1], [%rd1], 16;\n\tcp.async.commit_group;\n{wait}\
             \tld.shared.v4.u32 {{%r2, %r3, %r4, %r5}}, [%r1];\n\tst.global.v4.u32 [%rd0], {{%r2, %r3, %r4, %r5}};\n"
        )
    };
    let input = [1, 2, 3, 4];
    expect_err(
        run(&body(""), smem(16, 1), &input, 4),
        SimErrorKind::AsyncCopyHazard,
        &["still in flight", "issued by thread (0,0,0) at", &line(3), "`ld.shared.v4.u32"],
    );
    let lax = SimOptions { async_copy_hazards: false, ..SimOptions::default() };
    assert_eq!(run_with(&body(""), lax, smem(16, 1), &input, 4).unwrap(), [0, 0, 0, 0]);
    // wait_group 1 leaves the only committed group in flight: still stale.
    assert_eq!(
        run_with(&body("\tcp.async.wait_group 1;\n"), lax, smem(16, 1), &input, 4).unwrap(),
        [0; 4]
    );
    expect_err(
        run(&body("\tcp.async.wait_group 1;\n"), smem(16, 1), &input, 4),
        SimErrorKind::AsyncCopyHazard,
        &[],
    );
    assert_eq!(run(&body("\tcp.async.wait_group 0;\n"), smem(16, 1), &input, 4).unwrap(), input);
}

#[test]
fn cp_async_data_of_another_thread_needs_a_barrier_after_the_wait() {
    let body = "\
\tmov.u32 %r1, smem;\n\tshl.b32 %r2, %r60, 4;\n\tadd.s32 %r3, %r1, %r2;\n\
\tmul.wide.u32 %rd2, %r60, 16;\n\tadd.s64 %rd3, %rd1, %rd2;\n\
\tcp.async.cg.shared.global [%r3], [%rd3], 16;\n\tcp.async.wait_all;\n\
\txor.b32 %r4, %r60, 1;\n\tshl.b32 %r4, %r4, 4;\n\tadd.s32 %r4, %r1, %r4;\n\tld.shared.u32 %r5, [%r4];\n";
    expect_err(
        run(body, smem(512, 32), &[0; 128], 1),
        SimErrorKind::SharedRace,
        &["read-after-write race", "thread (1,0,0) wrote it", "cp.async.cg.shared.global"],
    );
}

#[test]
fn misaligned_vector_accesses() {
    let body = "\tld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1+4];\n";
    expect_err(
        run(body, block(1), &[0; 8], 1),
        SimErrorKind::Misaligned,
        &["global load of 16 bytes at 0x7f", "4, which is not 16-byte aligned", &line(0)],
    );
    let body = "\tmov.u32 %r1, smem;\n\tst.shared.v2.u32 [%r1+4], {%r1, %r1};\n";
    expect_err(
        run(body, smem(16, 1), &[], 1),
        SimErrorKind::Misaligned,
        &["shared store of 8 bytes"],
    );
}

const MMA: &str = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};";

#[test]
fn aligned_instruction_in_divergent_code() {
    let body = format!("\tsetp.ge.u32 %p1, %r60, 16;\n\t@%p1 bra SKIP;\n\t{MMA}\nSKIP:\n");
    expect_err(
        run(&body, block(32), &[], 1),
        SimErrorKind::IllegalCollective,
        &[
            "warp 0 cannot proceed",
            "lanes 0-15 wait at",
            &line(2),
            "lanes 16-31 have exited",
            "all 32 for .aligned",
        ],
    );
    // Both halves run an mma, but two different instructions.
    let body = format!(
        "\tsetp.ge.u32 %p1, %r60, 16;\n\t@%p1 bra B;\n\t{MMA}\n\tbra.uni END;\nB:\n\t{MMA}\nEND:\n"
    );
    expect_err(
        run(&body, block(32), &[], 1),
        SimErrorKind::IllegalCollective,
        &["lanes 0-15 wait at", &line(2), "lanes 16-31 wait at", &line(5)],
    );
}

#[test]
fn member_mask_naming_an_exited_lane() {
    let body =
        "\tsetp.ge.u32 %p1, %r60, 16;\n\t@%p1 ret;\n\tshfl.sync.bfly.b32 %r1, %r60, 1, 0x1f, -1;\n";
    expect_err(
        run(body, block(32), &[], 1),
        SimErrorKind::IllegalCollective,
        &["member mask 0xffffffff names lanes 16-31 that have exited", &line(2), "thread (0,0,0)"],
    );
    // A partial last warp has no lanes past the block's end: a full mask names missing lanes.
    let body = "\tshfl.sync.bfly.b32 %r1, %r60, 1, 0x1f, -1;\n";
    expect_err(
        run(body, block(40), &[], 1),
        SimErrorKind::IllegalCollective,
        &["names lanes 8-31 that have exited or do not exist"],
    );
}

#[test]
fn disagreeing_masks_and_sources_outside_the_mask() {
    let body = "\tsetp.lt.u32 %p1, %r60, 16;\n\tselp.b32 %r1, 0xffff, -1, %p1;\n\
                \tshfl.sync.idx.b32 %r2, %r60, 0, 0x1f, %r1;\n";
    expect_err(
        run(body, block(32), &[], 1),
        SimErrorKind::IllegalCollective,
        &["different member masks"],
    );
    let body = "\tsetp.ge.u32 %p1, %r60, 16;\n\t@%p1 bra END;\n\
                \tshfl.sync.idx.b32 %r2, %r60, 20, 0x1f, 0xffff;\nEND:\n";
    expect_err(
        run(body, block(32), &[], 1),
        SimErrorKind::IllegalCollective,
        &["reads lane 20, which is not in the member mask 0x0000ffff"],
    );
}

#[test]
fn barriers_reached_at_different_instructions() {
    let body = "\tsetp.ge.u32 %p1, %r60, 16;\n\t@%p1 bra B;\n\tbar.sync 0;\n\tbra.uni END;\nB:\n\tbar.sync 0;\nEND:\n";
    expect_err(
        run(body, block(32), &[], 1),
        SimErrorKind::IllegalCollective,
        &["bar.sync is .aligned", "lanes 0-15 of warp 0 wait at PTX line", "lane 16 at line"],
    );
    // barrier.sync without .aligned lets the lanes of a warp wait at different instructions.
    let body = body.replace("bar.sync 0", "barrier.sync 0");
    run(&body, block(32), &[], 1).unwrap();
    let body = "\tmov.u32 %r1, %warpid;\n\tbar.sync %r1;\n";
    expect_err(run(body, block(64), &[], 1), SimErrorKind::Deadlock, &["different barriers"]);
}

#[test]
fn uninitialized_shared_read() {
    let body = "\tmov.u32 %r1, smem;\n\tst.shared.u32 [%r1], 1;\n\tld.shared.u32 %r2, [%r1+4];\n";
    expect_err(
        run(body, smem(16, 1), &[], 1),
        SimErrorKind::UninitializedShared,
        &["read of shared byte 0x404, which no thread of this block has written", &line(2)],
    );
    let lax = SimOptions { uninitialized_shared: false, ..SimOptions::default() };
    run_with(body, lax, smem(16, 1), &[], 1).unwrap();
}

#[test]
fn trap_and_unknown_instructions() {
    expect_err(
        run("\ttrap;\n", block(1), &[], 1),
        SimErrorKind::Trap,
        &["executed `trap`", &line(0)],
    );
    let sim = Simulator::from_ptx(&kernel("\tfoo.bar.b32 %r1, %r2;\n")).unwrap();
    let err = sim.check_kernels().unwrap_err().to_string();
    assert!(
        err.contains("unknown instruction `foo.bar.b32`") && err.contains("kernel `k`"),
        "{err}"
    );
    expect_err(
        run_on(&sim, block(1), &[], 1),
        SimErrorKind::Unsupported,
        &["unknown instruction `foo.bar.b32`", "kernel `k`", &line(0)],
    );
}

#[test]
fn use_after_free_is_out_of_bounds() {
    let sim = Simulator::from_ptx(&kernel("\tst.global.u32 [%rd0], 1;\n")).unwrap();
    let addr = {
        let mut freed = sim.alloc::<u32>(4).unwrap();
        freed.view_mut().addr()
    };
    let mut params = addr.to_le_bytes().to_vec();
    params.extend_from_slice(&0u64.to_le_bytes());
    let err = sim.launch_bytes("k", block(1), &params).unwrap_err();
    assert!(err.to_string().contains("not in any live allocation"), "{err}");
}
