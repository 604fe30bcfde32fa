//! Loads, stores, address spaces, atomics and cp.async groups.

use crate::common::*;
use gpu_host::LaunchConfig;

#[test]
fn vector_and_narrow_loads_and_stores() {
    let body = "\
\tld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];\n\
\tst.global.v2.u32 [%rd0], {%r4, %r3};\n\
\tld.global.nc.v2.u32 {%r5, _}, [%rd1+8];\n\tst.global.u32 [%rd0+8], %r5;\n\
\tld.global.s8 %r6, [%rd1+3];\n\tst.global.u32 [%rd0+12], %r6;\n\
\tld.global.u8 %r6, [%rd1+3];\n\tst.global.u32 [%rd0+16], %r6;\n\
\tld.global.s16 %rd2, [%rd1+2];\n\tst.global.u64 [%rd0+24], %rd2;\n\
\tst.global.b16 [%rd0+32], %r1;\n\
\tst.global.u8 [%rd0+35], %r4;\n\
\tld.b32 %r7, [%rd1+4];\n\tst.b32 [%rd0+36], %r7;\n";
    let input = [0x8811_2233, 0x4444_4444, 0x5555_5555, 0x0000_00aa];
    let got = run(body, block(1), &input, 10).unwrap();
    assert_eq!(
        got,
        [
            0xaa,
            0x5555_5555,
            0x5555_5555,
            0xffff_ff88,
            0x88,
            u32::MAX,
            0xffff_8811,
            u32::MAX,
            0xaaff_2233,
            0x4444_4444
        ]
    );
}

#[test]
fn shared_memory_hands_values_across_warps_after_a_barrier() {
    // 64 threads: thread t stores t*3 at smem[t], then reads smem[63 - t].
    let body = "\
\tmov.u32 %r1, smem;\n\tshl.b32 %r2, %r0, 2;\n\tadd.s32 %r3, %r1, %r2;\n\
\tmul.lo.u32 %r4, %r0, 3;\n\tst.shared.u32 [%r3], %r4;\n\tbar.sync 0;\n\
\tsub.s32 %r5, 63, %r0;\n\tshl.b32 %r5, %r5, 2;\n\tadd.s32 %r5, %r1, %r5;\n\
\tld.shared.u32 %r6, [%r5];\n\
\tmul.wide.u32 %rd2, %r0, 4;\n\tadd.s64 %rd3, %rd0, %rd2;\n\tst.global.u32 [%rd3], %r6;\n";
    let config = LaunchConfig { shared_mem_bytes: 256, ..block(64) };
    let got = run(body, config, &[], 64).unwrap();
    let want: Vec<u32> = (0..64).map(|t| (63 - t) * 3).collect();
    assert_eq!(got, want);
}

#[test]
fn generic_addresses_reach_shared_param_and_local_memory() {
    let body = "\
\t.local .align 8 .b8 depot[16];\n\
\tmov.u64 %rd2, smem;\n\tcvta.shared.u64 %rd3, %rd2;\n\
\tst.u32 [%rd3+4], 77;\n\tld.shared.u32 %r1, [smem+4];\n\tst.global.u32 [%rd0], %r1;\n\
\tisspacep.shared %p1, %rd3;\n\tisspacep.global %p2, %rd3;\n\tisspacep.global %p3, %rd0;\n\
\tselp.u32 %r2, 1, 0, %p1;\n\tselp.u32 %r3, 2, 0, %p2;\n\tselp.u32 %r4, 4, 0, %p3;\n\
\tor.b32 %r2, %r2, %r3;\n\tor.b32 %r2, %r2, %r4;\n\tst.global.u32 [%rd0+4], %r2;\n\
\tcvta.to.shared.u64 %rd4, %rd3;\n\tcvt.u32.u64 %r5, %rd4;\n\tmov.u32 %r6, smem;\n\
\tsub.s32 %r7, %r5, %r6;\n\tst.global.u32 [%rd0+8], %r7;\n\
\tmov.u64 %rd5, k_in;\n\tcvta.param.u64 %rd6, %rd5;\n\tld.u64 %rd7, [%rd6];\n\
\tsub.s64 %rd8, %rd7, %rd1;\n\tst.global.u64 [%rd0+16], %rd8;\n\
\tmov.u64 %rd9, depot;\n\tcvta.local.u64 %rd10, %rd9;\n\tst.u32 [%rd10+12], 99;\n\
\tld.local.u32 %r8, [depot+12];\n\tst.global.u32 [%rd0+24], %r8;\n\
\tcvta.global.u64 %rd11, %rd0;\n\tsub.s64 %rd12, %rd11, %rd0;\n\tst.global.u64 [%rd0+32], %rd12;\n";
    let config = LaunchConfig { shared_mem_bytes: 16, ..block(1) };
    let got = run(body, config, &[], 10).unwrap();
    assert_eq!(got, [77, 1 | 4, 0, u32::MAX, 0, 0, 99, u32::MAX, 0, 0]);
}

#[test]
fn atomics_are_atomic_across_blocks_and_return_the_old_value() {
    let body = "\
\tatom.global.add.u32 %r1, [%rd0], 1;\n\
\tred.global.add.u32 [%rd0+4], 2;\n\
\tatom.global.max.s32 %r2, [%rd0+8], %r0;\n\
\tatom.global.add.f32 %f1, [%rd0+12], 0f3F000000;\n\
\tsetp.eq.u32 %p1, %r0, 0;\n\
\t@%p1 atom.global.exch.b32 %r3, [%rd0+16], 5;\n\
\t@%p1 atom.global.cas.b32 %r4, [%rd0+20], 0, 9;\n\
\t@%p1 atom.global.cas.b32 %r5, [%rd0+24], 1, 9;\n\
\t@%p1 atom.global.inc.u32 %r6, [%rd0+28], 0;\n\
\t@%p1 atom.global.dec.u32 %r7, [%rd0+32], 3;\n\
\t@%p1 st.global.u32 [%rd0+36], %r3;\n";
    let sim = ptx_sim::Simulator::from_ptx(&kernel(body)).unwrap();
    let mut out = gpu_host::Device::upload(&sim, &[0u32, 0, 0, 0, 1, 0, 0, 7, 0, 0]).unwrap();
    use gpu_host::{Device, DeviceBuffer};
    let input = sim.upload(&[0u32]).unwrap();
    let mut params = out.view_mut().addr().to_le_bytes().to_vec();
    params.extend_from_slice(&input.view().addr().to_le_bytes());
    sim.launch_bytes("k", LaunchConfig::linear(8, 96), &params).unwrap();
    let got = sim.download(out.view()).unwrap();
    // 8 blocks x 96 threads; thread 0 of each block does the exch/cas/inc/dec.
    assert_eq!(&got[..4], &[768, 1536, 95, f(384.0)]);
    assert_eq!(got[4], 5);
    assert_eq!(got[5], 9);
    assert_eq!(got[6], 0);
    assert_eq!(got[7], 0, "inc wraps to 0 when old >= b");
    // dec: 0 -> 3 -> 2 -> 1 -> 0 -> 3 -> 2 -> 1 -> 0 after 8 blocks
    assert_eq!(got[8], 0);
}

#[test]
fn shared_atomics_from_many_warps() {
    let body = "\
\tsetp.eq.u32 %p1, %r0, 0;\n\t@%p1 st.shared.u32 [smem], 0;\n\t@%p1 st.shared.f32 [smem+4], 0f00000000;\n\
\tbar.sync 0;\n\
\tatom.shared.add.u32 %r1, [smem], %r0;\n\tatom.shared.add.f32 %f1, [smem+4], 0f3F800000;\n\
\tbar.sync 0;\n\
\t@%p1 ld.shared.v2.u32 {%r2, %r3}, [smem];\n\t@%p1 st.global.v2.u32 [%rd0], {%r2, %r3};\n";
    let config = LaunchConfig { shared_mem_bytes: 8, ..block(256) };
    assert_eq!(run(body, config, &[], 2).unwrap(), [256 * 255 / 2, f(256.0)]);
}

#[test]
fn cp_async_groups_complete_oldest_first() {
    // Three groups of one 4-byte copy each (values 1, 2, 3 into smem[0..3]); wait_group 2
    // completes only the first, wait_group 1 the second; the third lands at wait_all.
    let body = "\
\tmov.u32 %r1, smem;\n\tst.shared.v4.u32 [%r1], {%r60, %r60, %r60, %r60};\n\
\tcp.async.ca.shared.global [%r1], [%rd1], 4;\n\tcp.async.commit_group;\n\
\tadd.s32 %r2, %r1, 4;\n\tcp.async.ca.shared.global [%r2], [%rd1+4], 4;\n\tcp.async.commit_group;\n\
\tadd.s32 %r3, %r1, 8;\n\tcp.async.ca.shared.global [%r3], [%rd1+8], 4;\n\tcp.async.commit_group;\n\
\tcp.async.wait_group 2;\n\tld.shared.u32 %r4, [%r1];\n\tst.global.u32 [%rd0], %r4;\n\
\tcp.async.wait_group 1;\n\tld.shared.u32 %r4, [%r2];\n\tst.global.u32 [%rd0+4], %r4;\n\
\tcp.async.wait_all;\n\tld.shared.u32 %r4, [%r3];\n\tst.global.u32 [%rd0+8], %r4;\n\
\tadd.s32 %r5, %r1, 12;\n\tsetp.ne.u32 %p1, %r0, 99;\n\
\tcp.async.ca.shared.global [%r5], [%rd1], 4, %p1;\n\tcp.async.wait_all;\n\
\tld.shared.u32 %r4, [%r5];\n\tst.global.u32 [%rd0+12], %r4;\n";
    let config = LaunchConfig { shared_mem_bytes: 16, ..block(1) };
    assert_eq!(run(body, config, &[1, 2, 3], 4).unwrap(), [1, 2, 3, 0]);
}

#[test]
fn cp_async_src_size_zero_fills_and_its_window_must_lie_in_the_allocation() {
    // A 20-byte input: 5 bytes copied from the first window (the rest zero-filled, though
    // the window holds more); a partial copy of the second window, which leaves the
    // allocation, fails as compute-sanitizer's memcheck reports it.
    let copy = |offset: u32, src_size: u32| {
        format!(
            "\tmov.u32 %r1, smem;\n\tst.shared.v4.u32 [%r1], {{%r60, %r60, %r60, %r60}};\n\
             \tcp.async.cg.shared.global [%r1], [%rd1+{offset}], 16, {src_size};\n\
             \tcp.async.wait_all;\n\tld.shared.v4.u32 {{%r2, %r3, %r4, %r5}}, [%r1];\n\
             \tst.global.v4.u32 [%rd0], {{%r2, %r3, %r4, %r5}};\n"
        )
    };
    let config = LaunchConfig { shared_mem_bytes: 16, ..block(1) };
    let input = [0x1111_1111, 0x2222_2222, 0x3333_3333, 0x4444_4444, 0x5555_5555];
    assert_eq!(run(&copy(0, 5), config, &input, 4).unwrap(), [0x1111_1111, 0x22, 0, 0]);
    let err = run(&copy(16, 4), config, &input, 4).unwrap_err();
    assert!(err.to_string().contains("memcheck counts the whole window"), "{err}");
}

#[test]
fn parameters_are_laid_out_with_their_alignment() {
    let ptx = ".version 7.8\n.target sm_80\n.address_size 64\n\
        .visible .entry p(.param .u32 p_a, .param .u64 p_out, .param .align 4 .b8 p_s[6])\n{\n\
        .reg .b32 %r<4>;\n.reg .b64 %rd<2>;\n.reg .b16 %rs<2>;\n\
        ld.param.u32 %r1, [p_a];\n ld.param.u64 %rd1, [p_out];\n ld.param.u16 %rs1, [p_s+4];\n\
        cvt.u32.u16 %r2, %rs1;\n add.s32 %r3, %r1, %r2;\n st.global.u32 [%rd1], %r3;\n ret;\n}\n";
    use gpu_host::{Device, DeviceBuffer};
    let sim = ptx_sim::Simulator::from_ptx(ptx).unwrap();
    let mut out = sim.upload(&[0u32]).unwrap();
    let mut params = 40u32.to_le_bytes().to_vec();
    params.extend_from_slice(&[0; 4]);
    params.extend_from_slice(&out.view_mut().addr().to_le_bytes());
    params.extend_from_slice(&[0, 0, 0, 0, 2, 0]);
    sim.launch_bytes("p", block(1), &params).unwrap();
    assert_eq!(sim.download(out.view()).unwrap(), [42]);
    let err = sim.launch_bytes("p", block(1), &params[..20]).unwrap_err();
    assert!(err.to_string().contains("20 bytes given, the entry declares 22"), "{err}");
}

#[test]
fn a_memory_limit_fails_allocations_past_it_like_a_gpu() {
    use gpu_host::{Device, GpuError};
    use ptx_sim::{SimOptions, Simulator};
    let options = SimOptions { memory_limit: Some(1000), ..SimOptions::default() };
    let sim = Simulator::from_ptx(&kernel("")).unwrap().with_options(options);
    let first = sim.alloc::<f32>(200).unwrap();
    match sim.alloc::<f32>(51) {
        Err(GpuError::OutOfMemory { bytes: 204, free: 200, total: 1000 }) => {}
        other => panic!("expected out of memory, got {:?}", other.map(|_| ())),
    }
    let second = sim.alloc::<f32>(50).unwrap();
    drop((first, second));
    sim.alloc::<u8>(1000).expect("freed memory is available again");
}
