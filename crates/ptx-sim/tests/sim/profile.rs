//! The memory-access profile (`ptx_sim::profile`) of hand-written kernels whose access
//! patterns have known costs: coalesced and strided global accesses, a bank conflict and a
//! broadcast in shared memory, `ldmatrix` rows with and without a conflict.

use crate::common::*;
use gpu_host::LaunchConfig;
use ptx_sim::profile::{AccessKind, KernelProfile};
use ptx_sim::{SimOptions, Simulator};

/// A simulator of `body` (see [`kernel`]) without the shared-memory race and initialisation
/// checks: the kernels below only exercise access patterns.
fn simulator(body: &str) -> Simulator {
    let unchecked =
        SimOptions { racecheck: false, uninitialized_shared: false, ..SimOptions::default() };
    Simulator::from_ptx(&kernel(body)).unwrap().with_options(unchecked)
}

/// Runs `body` twice on one warp with 64 KiB of input and output and the profile on;
/// returns the profile.
fn profile(body: &str) -> KernelProfile {
    let sim = simulator(body);
    sim.start_memory_profile();
    let config = LaunchConfig { shared_mem_bytes: 8192, ..block(32) };
    run_on(&sim, config, &vec![1u32; 16384], 16384).unwrap();
    run_on(&sim, config, &vec![1u32; 16384], 16384).unwrap();
    let mut kernels = sim.take_memory_profile();
    assert_eq!(kernels.len(), 1);
    assert!(sim.take_memory_profile().is_empty(), "taking the profile ends it");
    kernels.remove(0)
}

/// `%rd10` = in + 4·tid·`stride_words`, `%r10` = smem + 4·tid·`stride_words` (shared).
fn addresses(stride_words: u32) -> String {
    format!(
        "\tmul.lo.u32 %r11, %r0, {};\n\tcvt.u64.u32 %rd11, %r11;\n\tadd.u64 %rd10, %rd1, %rd11;\n\
         \tmov.u32 %r10, smem;\n\tadd.u32 %r10, %r10, %r11;\n",
        4 * stride_words
    )
}

#[test]
fn global_sectors_per_request() {
    let p = profile(&format!(
        "{}\tld.global.u32 %r1, [%rd10];\n{}\tld.global.u32 %r2, [%rd10];\n\
         \tadd.u64 %rd12, %rd0, 64;\n\tst.global.u32 [%rd12], %r1;\n",
        addresses(1),
        addresses(32)
    ));
    assert_eq!(p.kernel, "k");
    assert_eq!(p.launches, 2);
    let [coalesced, strided, broadcast] = &p.instrs[..] else { panic!("{p:#?}") };
    assert_eq!(coalesced.kind, AccessKind::GlobalLoad);
    assert_eq!(coalesced.text, "ld.global.u32 %r1, [%rd10];");
    assert_eq!(coalesced.line, BODY_LINE + 5);
    assert_eq!((coalesced.stats.requests, coalesced.stats.sectors), (2, 8));
    assert_eq!(coalesced.stats.global_efficiency(), Some(1.0));
    assert_eq!((strided.stats.requests, strided.stats.sectors), (2, 64));
    assert_eq!(strided.stats.global_efficiency(), Some(0.125));
    // 32 lanes storing to one word: one sector, as many bytes asked for as lanes.
    assert_eq!((broadcast.kind, broadcast.stats.sectors), (AccessKind::GlobalStore, 2));
}

#[test]
fn shared_wavefronts_per_request() {
    let p = profile(&format!(
        "{}\tst.shared.u32 [%r10], %r0;\n{}\tst.shared.u32 [%r10], %r0;\n\
         \tbar.sync 0;\n\tmov.u32 %r12, smem;\n\tld.shared.u32 %r1, [%r12];\n",
        addresses(1),
        addresses(8)
    ));
    let [clean, conflicted, broadcast] = &p.instrs[..] else { panic!("{p:#?}") };
    assert_eq!(clean.kind, AccessKind::SharedStore);
    assert_eq!(clean.stats.bank_conflict_factor(), Some(1.0));
    // Words 8·lane: banks 0, 8, 16, 24, eight lanes each.
    assert_eq!((conflicted.stats.wavefronts, conflicted.stats.ideal_wavefronts), (16, 2));
    assert_eq!(
        (broadcast.kind, broadcast.stats.bank_conflict_factor()),
        (AccessKind::SharedLoad, Some(1.0))
    );
}

#[test]
fn ldmatrix_rows_and_the_profile_switch() {
    // Rows 16 bytes apart (conflict-free), then 128 bytes apart (each matrix's 8 rows on the
    // same 4 banks).
    let body = |stride_words| {
        format!(
            "{}\tldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%r1, %r2, %r3, %r4}}, [%r10];\n",
            addresses(stride_words)
        )
    };
    let clean = profile(&body(4));
    assert_eq!(clean.instrs[0].kind, AccessKind::Ldmatrix);
    assert_eq!(clean.instrs[0].stats.bank_conflict_factor(), Some(1.0));
    let conflicted = profile(&body(32));
    assert_eq!(conflicted.instrs[0].stats.bank_conflict_factor(), Some(8.0));
    // Without start_memory_profile nothing is counted.
    let sim = simulator(&body(4));
    run_on(&sim, LaunchConfig { shared_mem_bytes: 8192, ..block(32) }, &[1], 1).unwrap();
    assert!(sim.take_memory_profile().is_empty());
}
