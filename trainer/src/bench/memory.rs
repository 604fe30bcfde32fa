//! `trainer bench --memory-profile`: the simulator's memory-access profile of every kernel a
//! configuration launched (`ptx_sim::profile`): global-memory efficiency (bytes asked for per
//! byte of the 32-byte sectors fetched) and shared-memory bank conflicts (wavefronts per ideal
//! wavefront), each kernel's worst instruction named.

use ptx_sim::profile::{InstrProfile, KernelProfile, SECTOR_BYTES};
use std::fmt::Write;

/// The memory transactions `instr` spends beyond what its accesses need: sectors fetched
/// beyond the bytes asked for, plus wavefronts beyond the ideal.
fn excess(instr: &InstrProfile) -> f64 {
    let s = &instr.stats;
    let needed = (s.global_bytes as f64 / SECTOR_BYTES as f64).min(s.sectors as f64);
    (s.sectors as f64 - needed) + (s.wavefronts - s.ideal_wavefronts) as f64
}

/// `kernel`'s instruction with the most excess transactions, if any has some.
fn worst(kernel: &KernelProfile) -> Option<&InstrProfile> {
    kernel.instrs.iter().filter(|i| excess(i) > 0.0).max_by(|a, b| excess(a).total_cmp(&excess(b)))
}

/// `instr` in one cell: its line, text and what it wastes.
fn describe(instr: &InstrProfile) -> String {
    let s = &instr.stats;
    let mut what = Vec::new();
    if let Some(e) = s.global_efficiency().filter(|e| *e < 1.0) {
        what.push(format!("{:.0}% of the sectors used", 100.0 * e));
    }
    if let Some(f) = s.bank_conflict_factor().filter(|f| *f > 1.0) {
        what.push(format!("{f:.2}× the ideal wavefronts"));
    }
    format!("line {} `{}`: {}", instr.line, instr.text.replace('|', "\\|"), what.join(", "))
}

/// The log's lines for one configuration's profile: a summary, then one line per kernel that
/// wastes transactions.
pub fn memory_lines(kernels: &[KernelProfile]) -> Vec<String> {
    let wasteful: Vec<(&KernelProfile, &InstrProfile)> =
        kernels.iter().filter_map(|k| Some((k, worst(k)?))).collect();
    let mut lines = vec![format!(
        "memory profile (simulator): {} kernels, {} with uncoalesced global accesses or bank \
         conflicts{}",
        kernels.len(),
        wasteful.len(),
        if wasteful.is_empty() { "" } else { ":" }
    )];
    for (kernel, instr) in wasteful {
        lines.push(format!("  {}: worst {}", kernel.kernel, describe(instr)));
    }
    lines
}

/// The report's section: per configuration, one row per kernel.
pub fn memory_markdown(profiles: &[(String, Vec<KernelProfile>)]) -> String {
    if profiles.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## Memory access profile (simulator)\n\nCounted by the PTX simulator over the \
         configuration's warm-up and timed steps, per warp-level request as Nsight Compute \
         counts them (`ptx_sim::profile`). Global: bytes the lanes asked for per byte of the \
         32-byte sectors fetched (100% = coalesced), and sectors per request. Shared: \
         wavefronts per ideal wavefront (1.00 = no bank conflicts; `ldmatrix` and `cp.async` \
         included, TMA and wgmma not). Worst: the instruction with the most transactions \
         beyond what its accesses need.\n",
    );
    for (label, kernels) in profiles {
        let _ = writeln!(
            s,
            "\n### {label}\n\n| kernel | launches | global efficiency | sectors/request | \
             bank-conflict factor | worst instruction |\n|---|---:|---:|---:|---:|---|"
        );
        for k in kernels {
            let total = k.total();
            let efficiency =
                total.global_efficiency().map_or("–".into(), |e| format!("{:.1}%", 100.0 * e));
            let per_request = if total.sectors > 0 {
                let requests: u64 =
                    k.instrs.iter().filter(|i| i.stats.sectors > 0).map(|i| i.stats.requests).sum();
                format!("{:.1}", total.sectors as f64 / requests.max(1) as f64)
            } else {
                "–".into()
            };
            let factor = total.bank_conflict_factor().map_or("–".into(), |f| format!("{f:.2}"));
            let worst = worst(k).map_or("–".into(), describe);
            let _ = writeln!(
                s,
                "| `{}` | {} | {efficiency} | {per_request} | {factor} | {worst} |",
                k.kernel, k.launches
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptx_sim::profile::{AccessKind, AccessStats};

    fn instr(line: u32, kind: AccessKind, stats: AccessStats) -> InstrProfile {
        InstrProfile { line, text: format!("op{line};"), kind, stats }
    }

    #[test]
    fn the_worst_instruction_is_the_one_wasting_most() {
        let coalesced =
            AccessStats { requests: 4, global_bytes: 512, sectors: 16, ..Default::default() };
        let strided =
            AccessStats { requests: 1, global_bytes: 128, sectors: 32, ..Default::default() };
        let conflicted =
            AccessStats { requests: 1, wavefronts: 8, ideal_wavefronts: 4, ..Default::default() };
        let kernels = vec![
            KernelProfile {
                kernel: "clean".into(),
                launches: 2,
                instrs: vec![instr(3, AccessKind::GlobalLoad, coalesced)],
            },
            KernelProfile {
                kernel: "messy".into(),
                launches: 1,
                instrs: vec![
                    instr(5, AccessKind::SharedLoad, conflicted),
                    instr(9, AccessKind::GlobalStore, strided),
                ],
            },
        ];
        let lines = memory_lines(&kernels);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("2 kernels, 1 with"), "{}", lines[0]);
        assert_eq!(lines[1], "  messy: worst line 9 `op9;`: 12% of the sectors used");
        let md = memory_markdown(&[("d2 fp32".into(), kernels)]);
        assert!(md.contains("| `clean` | 2 | 100.0% | 4.0 | – | – |"), "{md}");
        assert!(md.contains("| `messy` | 1 | 12.5% | 32.0 | 2.00 | line 9 `op9;`"), "{md}");
    }
}
