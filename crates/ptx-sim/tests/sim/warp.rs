//! Warp collectives: shfl.sync modes with segments and clamps, vote, redux, activemask,
//! bar.warp.sync.

use crate::common::*;

const STORE_R9: &str =
    "\tmul.wide.u32 %rd30, %r0, 4;\n\tadd.s64 %rd31, %rd0, %rd30;\n\tst.global.u32 [%rd31], %r9;\n";

/// `shfl.sync.<mode>` of `100 + lane` with `b`, `c`; returns (value, predicate) per lane.
fn shfl(mode: &str, b: u32, c: u32) -> Vec<(u32, bool)> {
    let body = format!(
        "\tadd.s32 %r1, %r60, 100;\n\tshfl.sync.{mode}.b32 %r2|%p1, %r1, {b}, {c:#x}, -1;\n\
         \tselp.u32 %r3, 0x10000, 0, %p1;\n\tor.b32 %r9, %r2, %r3;\n{STORE_R9}"
    );
    run(&body, block(32), &[], 32).unwrap().iter().map(|v| (v & 0xffff, v >> 16 == 1)).collect()
}

#[test]
fn shuffles_follow_the_isa_lane_arithmetic() {
    let width8 = (32 - 8) << 8;
    for l in 0..32u32 {
        let seg = l & !7;
        let down = shfl("down", 3, width8 | 0x1f)[l as usize];
        let valid = l % 8 + 3 < 8;
        assert_eq!(down, (100 + if valid { l + 3 } else { l }, valid), "down lane {l}");
        let up = shfl("up", 2, width8)[l as usize];
        let valid = l % 8 >= 2;
        assert_eq!(up, (100 + if valid { l - 2 } else { l }, valid), "up lane {l}");
        assert_eq!(
            shfl("idx", 5, width8 | 0x1f)[l as usize],
            (100 + seg + 5, true),
            "idx lane {l}"
        );
        assert_eq!(
            shfl("bfly", 4, width8 | 0x1f)[l as usize],
            (100 + (l ^ 4), true),
            "bfly lane {l}"
        );
        // Full width: idx wraps modulo 32 through the 5-bit lane field.
        assert_eq!(shfl("idx", 37, 0x1f)[l as usize], (105, true), "idx 37 lane {l}");
        let down_full = shfl("down", 1, 0x1f)[l as usize];
        assert_eq!(down_full, (100 + (l + 1).min(31), l < 31), "down full lane {l}");
    }
}

#[test]
fn votes_and_reductions() {
    let body = "\tsetp.lt.u32 %p1, %r60, 10;\n\tvote.sync.ballot.b32 %r1, %p1, -1;\n\
         \tvote.sync.any.pred %p2, %p1, -1;\n\tvote.sync.all.pred %p3, %p1, -1;\n\
         \tsetp.ne.u32 %p4, 0, 0;\n\tsetp.ne.u32 %p5, 0, 0;\n\t@!%p1 bra HIGH;\n\
         \tvote.sync.uni.pred %p4, !%p1, 0x3ff;\n\tbra.uni JOIN;\n\
         HIGH:\n\tvote.sync.all.pred %p5, !%p1, 0xfffffc00;\nJOIN:\n\
         \tselp.u32 %r2, 1, 0, %p2;\n\tselp.u32 %r3, 2, 0, %p3;\n\tselp.u32 %r4, 4, 0, %p4;\n\
         \tselp.u32 %r5, 8, 0, %p5;\n\tor.b32 %r6, %r2, %r3;\n\tor.b32 %r6, %r6, %r4;\n\
         \tor.b32 %r6, %r6, %r5;\n\tsub.s32 %r7, 15, %r60;\n\
         \tredux.sync.add.u32 %r10, %r60, -1;\n\tredux.sync.min.s32 %r11, %r7, -1;\n\
         \tredux.sync.max.u32 %r12, %r7, -1;\n\tredux.sync.or.b32 %r13, %r1, -1;\n\
         \tsetp.eq.u32 %p6, %r60, 0;\n\t@!%p6 bra END;\n\
         \tst.global.v4.u32 [%rd0], {%r1, %r10, %r11, %r12};\n\tst.global.u32 [%rd0+16], %r13;\nEND:\n\
         \tmul.wide.u32 %rd30, %r0, 4;\n\tadd.s64 %rd31, %rd0, %rd30;\n\tst.global.u32 [%rd31+32], %r6;\n";
    let got = run(body, block(32), &[], 40).unwrap();
    // min.s32 of 15 - lane is -16; max.u32 sees 15 - 16 as 0xffffffff.
    assert_eq!(&got[..5], &[0x3ff, 496, (15 - 31) as u32, u32::MAX, 0x3ff]);
    for l in 0..32 {
        // any = 1, all = 0 everywhere; the masked uni/all ran on subsets.
        let in_low = l < 10;
        let want = 1 | if in_low { 4 } else { 8 };
        assert_eq!(got[8 + l], want, "lane {l}");
    }
}

#[test]
fn activemask_reports_the_lanes_executing_together() {
    let body = format!(
        "\tsetp.lt.u32 %p1, %r60, 10;\n\t@%p1 bra LOW;\n\tactivemask.b32 %r9;\n\tbra JOIN;\n\
         LOW:\n\tactivemask.b32 %r9;\nJOIN:\n{STORE_R9}"
    );
    let got = run(&body, block(32), &[], 32).unwrap();
    assert_eq!(got, (0..32).map(|l| if l < 10 { 0x3ff } else { !0x3ff }).collect::<Vec<u32>>());
}

#[test]
fn bar_warp_sync_orders_shared_accesses_within_a_warp() {
    let body = format!(
        "\tmov.u32 %r1, smem;\n\tshl.b32 %r2, %r60, 2;\n\tadd.s32 %r3, %r1, %r2;\n\
         \tst.shared.u32 [%r3], %r60;\n\tbar.warp.sync -1;\n\txor.b32 %r4, %r60, 1;\n\
         \tshl.b32 %r4, %r4, 2;\n\tadd.s32 %r4, %r1, %r4;\n\tld.shared.u32 %r9, [%r4];\n{STORE_R9}"
    );
    let config = gpu_host::LaunchConfig { shared_mem_bytes: 128, ..block(32) };
    let got = run(&body, config, &[], 32).unwrap();
    assert_eq!(got, (0..32).map(|l| l ^ 1).collect::<Vec<u32>>());
}
