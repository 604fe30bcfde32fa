//! The benchmark report: rows, the markdown table, and small formatting helpers.

use gpu_host::kernels::gemm::{GemmSpec, Precision};
use std::fmt::Write;

/// Facts about the run, printed above the tables.
#[derive(Clone, Debug)]
pub struct Meta {
    /// `Device::describe` of the GPU.
    pub device: String,
    /// The driver's device name.
    pub device_name: String,
    /// UTC date, `YYYY-MM-DD`.
    pub date: String,
    /// Git commit of the kernels.
    pub commit: String,
    /// Warm-up launches per measurement.
    pub warmup: usize,
    /// Timed launches per measurement.
    pub reps: usize,
    /// L2 size in bytes (the operand rotation exceeds twice this).
    pub l2_bytes: usize,
}

impl Meta {
    /// The report's title line (`# {title}: {device name}`) and its device and date/commit
    /// lines, which every benchmark report starts with.
    pub fn header(&self, title: &str) -> String {
        format!(
            "# {title}: {}\n\n- Device: {}\n- Date (UTC): {}; commit: `{}`\n",
            self.device_name, self.device, self.date, self.commit
        )
    }
}

/// One problem in one variant.
#[derive(Clone, Debug)]
pub struct Row {
    /// Problem name (`fc dW`, …).
    pub problem: String,
    /// Its shape and layouts.
    pub spec: GemmSpec,
    /// Our variant (`BF16 mma.sync`, …).
    pub variant: String,
    /// Our TFLOP/s.
    pub ours: f64,
    /// cuBLAS (`cublasSgemm` / `cublasGemmEx`) name and TFLOP/s.
    pub blas: (&'static str, f64),
    /// cuBLASLt TFLOP/s (none where its heuristic had no plan for the problem).
    pub lt: Option<f64>,
    /// The faster baseline's name and TFLOP/s.
    pub best: (&'static str, f64),
    /// max |ours − best baseline| / max |baseline| on sampled rows (NaN where the baseline
    /// does other work: a fused problem without cuBLASLt's fused epilogue).
    pub rel_diff: f64,
}

impl Row {
    /// Our speed as a percentage of the faster baseline.
    pub fn percent(&self) -> f64 {
        100.0 * self.ours / self.best.1
    }
}

/// Median of `values` (sorted in place); 0 for none.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 { values[mid] } else { 0.5 * (values[mid - 1] + values[mid]) }
}

fn layouts(spec: &GemmSpec) -> String {
    let beta = if spec.beta != 0.0 { ", β=1" } else { "" };
    let split = match (spec.split_plan().0, spec.whole_tiles) {
        (1, _) if spec.stream_k_blocks > 0 => {
            format!(", stream-K over {} blocks", spec.stream_k_blocks)
        }
        (1, _) => String::new(),
        (slices, 0) => format!(", split-K {slices}"),
        (slices, whole) => format!(", tail split-K {slices} ({whole} tiles whole)"),
    };
    format!("{}{beta}{split}", spec.layout_name())
}

/// `M×N×K`, preceded by `batch ×` when batched.
fn shape(spec: &GemmSpec) -> String {
    let batch = if spec.batch > 1 { format!("{} × ", spec.batch) } else { String::new() };
    format!("{batch}{}×{}×{}", spec.m, spec.n, spec.k)
}

/// cuBLASLt's TFLOP/s, or `–` where it had no plan.
fn lt_cell(lt: Option<f64>) -> String {
    lt.map_or_else(|| "–".to_string(), |tflops| format!("{tflops:.1}"))
}

/// The relative difference, or `–` where none was measured.
fn diff_cell(diff: f64) -> String {
    if diff.is_nan() { "–".to_string() } else { format!("{diff:.1e}") }
}

/// One line per measurement while the benchmark runs.
pub fn progress_line(row: &Row) -> String {
    format!(
        "{:16} {:14} ours {:7.1}  {} {:7.1}  cublasLt {:>7}  ({:5.1}% of best)  diff {}",
        row.problem,
        row.variant,
        row.ours,
        row.blas.0,
        row.blas.1,
        lt_cell(row.lt),
        row.percent(),
        diff_cell(row.rel_diff)
    )
}

/// Geometric mean of `values` (all positive).
fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// The variants of `rows`, in order of first appearance.
fn variants(rows: &[Row]) -> Vec<&str> {
    let mut variants: Vec<&str> = Vec::new();
    for row in rows {
        if !variants.contains(&row.variant.as_str()) {
            variants.push(&row.variant);
        }
    }
    variants
}

/// One variant's speed relative to cuBLAS over the GPT-2 linear layers' problems (the
/// `square …`, `attention …` and fused ones excluded).
struct Summary<'a> {
    variant: &'a str,
    /// Problems the variant ran (some run only where they apply).
    problems: usize,
    geomean: f64,
    min: f64,
    max: f64,
}

/// A [`Summary`] per variant that has GPT-2 rows.
fn summaries(rows: &[Row]) -> Vec<Summary<'_>> {
    variants(rows)
        .into_iter()
        .filter_map(|variant| {
            let pct: Vec<f64> = rows
                .iter()
                .filter(|r| r.variant == variant && is_linear_layer(&r.problem))
                .map(Row::percent)
                .collect();
            let (min, max) =
                pct.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &p| (lo.min(p), hi.max(p)));
            let problems = pct.len();
            (problems > 0).then(|| Summary { variant, problems, geomean: geomean(&pct), min, max })
        })
        .collect()
}

/// Whether `problem` is one of a GPT-2 linear layer's bare GEMMs (what the summary averages;
/// the fused ones, `… + …`, are compared with another baseline).
fn is_linear_layer(problem: &str) -> bool {
    !problem.starts_with("square") && !problem.starts_with("attention") && !problem.contains(" + ")
}

/// `FP32`, `TF32`, `BF16`, `FP16`.
fn precision_name(precision: Precision) -> &'static str {
    match precision {
        Precision::Fp32 => "FP32",
        Precision::Tf32 => "TF32",
        Precision::Bf16 => "BF16",
        Precision::Fp16 => "FP16",
    }
}

/// For each precision timed in more than one variant (on Hopper: `mma.sync`, wgmma with the
/// tile `Auto` picks and each tile forced), a table of every problem's % of cuBLAS in each
/// variant and the fastest variant: what the engine and tile heuristics are checked against.
fn side_by_side(rows: &[Row]) -> String {
    let mut s = String::new();
    let mut precisions = Vec::new();
    for r in rows {
        if !precisions.contains(&r.spec.precision) {
            precisions.push(r.spec.precision);
        }
    }
    for precision in precisions {
        let of_precision: Vec<&Row> =
            rows.iter().filter(|r| r.spec.precision == precision).collect();
        let mut variants: Vec<&str> = Vec::new();
        let mut problems: Vec<(&str, String)> = Vec::new();
        for r in &of_precision {
            if !variants.contains(&r.variant.as_str()) {
                variants.push(&r.variant);
            }
            let problem = (r.problem.as_str(), layouts(&r.spec));
            if !problems.contains(&problem) {
                problems.push(problem);
            }
        }
        if variants.len() < 2 {
            continue;
        }
        let _ = writeln!(s, "\n## {} side by side (% of cuBLAS)\n", precision_name(precision));
        let _ = writeln!(s, "| problem | layout | {} | fastest |", variants.join(" | "));
        let _ = writeln!(s, "|---|---|{}---|", "---:|".repeat(variants.len()));
        for (problem, layout) in &problems {
            let of_problem = |variant: &str| {
                of_precision.iter().find(|r| {
                    r.problem == *problem && layouts(&r.spec) == *layout && r.variant == variant
                })
            };
            let cells: Vec<String> = variants
                .iter()
                .map(|v| of_problem(v).map_or("–".into(), |r| format!("{:.1}", r.percent())))
                .collect();
            let fastest = variants
                .iter()
                .filter_map(|v| of_problem(v))
                .max_by(|a, b| a.ours.total_cmp(&b.ours))
                .map_or("–", |r| r.variant.as_str());
            let _ = writeln!(s, "| {problem} | {layout} | {} | {fastest} |", cells.join(" | "));
        }
    }
    s
}

/// One line for the GPU bundle's summary: each variant's geo-mean % of cuBLAS.
pub fn headline(rows: &[Row]) -> String {
    let parts: Vec<String> =
        summaries(rows).iter().map(|s| format!("{} {:.0}%", s.variant, s.geomean)).collect();
    format!("geo-mean of cuBLAS on GPT-2 shapes: {}", parts.join(", "))
}

/// The pipeline depth of each Hopper tile, as the kernels of this build have it (reports of
/// different commits compare tiles whose rings may differ).
fn hopper_rings() -> String {
    use kernel_abi::gemm_wgmma::wg;
    let stages = |t: wg::Tile| t.stages;
    format!(
        "- Hopper (wgmma) tiles' TMA rings: 128×128 {} stages, 128×256 {}, ping-pong {}, \
         deferred {}, stream-K {} (`kernel_abi::gemm_wgmma::wg`).",
        stages(wg::N128),
        stages(wg::N256),
        stages(wg::PINGPONG),
        stages(wg::DEFERRED),
        stages(wg::STREAM_K)
    )
}

/// The report: header, a summary per variant over the GPT-2 problems, then one table per
/// variant.
pub fn markdown(meta: &Meta, cublas_version: &str, rows: &[Row]) -> String {
    let mut s = meta.header("GEMM benchmark");
    let _ = writeln!(
        s,
        "- Method: `cargo xtask bench gemm`. CUDA events around every launch, {} warm-up \
         launches (at least one per operand copy), median of {} timed launches; per problem \
         and precision the baselines and our variants timed in interleaved rounds (each round \
         launches each once), so that all meet the same clocks and temperature; operands \
         rotated over enough copies to exceed 2 × L2 ({} MB); uniform random data in [-1, 1). \
         TFLOP/s = 2·M·N·K / time.",
        meta.warmup,
        meta.reps,
        meta.l2_bytes >> 20
    );
    let _ = writeln!(
        s,
        "- Baselines (cuBLAS {cublas_version}): FP32 = `cublasSgemm` and cuBLASLt \
         `COMPUTE_32F`; TF32 = `cublasGemmEx` and cuBLASLt with `CUBLAS_COMPUTE_32F_FAST_TF32`; BF16 / FP16 = `cublasGemmEx` and cuBLASLt \
         (16-bit in and out, f32 accumulation). \"% of cuBLAS\" is against the faster of the two. \
         \"diff\" = max |ours − cuBLAS| / max |cuBLAS| over 8 sampled rows."
    );
    let _ = writeln!(
        s,
        "- Layouts: `rc` = A row-major, B column-major (`X·Wᵀ`), `rr` = `dY·W`, `cr` = \
         `dYᵀ·X` (β=1 accumulates into dW); \"split-K n\": our kernel ran as n K slices plus \
         the reduction pass (both timed); \"tail split-K n (w tiles whole)\": the first w \
         tiles (whole waves of the persistent grid) over the whole K, only the others in n \
         slices, and the reduction of those; \"stream-K over g blocks\": 128 × 256 tiles whose \
         k-tiles g blocks share evenly, the partial tiles added by the last block to finish \
         each (and the zeroing of their counters, timed). GPT-2 124M at B·T = 16384 tokens; the attention's \
         products batched over its 192 heads (B·NH), in full, not in the trainer's causal \
         blocks, and outside the summary.\n- Fused (`… + …`, outside the summary): the GEMM \
         with the epilogue the trainer fuses into it, against cuBLASLt's fused epilogue of the \
         same work (`BIAS`: the bias alone; `GELU_AUX_BIAS`: bias, GELU, the pre-activation stored; `DGELU_BGRAD`: \
         the GELU backward from a stored pre-activation and the bias gradient, ours from the \
         epilogue's column sums plus their reduction, both timed), which is the \"cuBLASLt\" \
         column and the baseline; the cuBLAS column is the bare GEMM, for scale. Without a \
         cuBLASLt plan the baseline is the bare GEMM and there is no diff.\n"
    );
    let _ = writeln!(s, "{}\n", hopper_rings());
    let _ = writeln!(s, "## Summary (GPT-2 linear layers)\n");
    let _ = writeln!(s, "| variant | problems | geo-mean % of cuBLAS | min % | max % |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|");
    for summary in summaries(rows) {
        let Summary { variant, problems, geomean, min, max } = summary;
        let _ = writeln!(s, "| {variant} | {problems} | {geomean:.1} | {min:.1} | {max:.1} |");
    }
    s.push_str(&side_by_side(rows));
    for variant in variants(rows) {
        let _ = writeln!(s, "\n## {variant}\n");
        let _ = writeln!(
            s,
            "| problem | M×N×K | layout | ours TFLOP/s | cuBLAS TFLOP/s | cuBLASLt TFLOP/s | % of cuBLAS | diff |"
        );
        let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---:|");
        for r in rows.iter().filter(|r| r.variant == *variant) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.1} | {:.1} ({}) | {} | {:.1} | {} |",
                r.problem,
                shape(&r.spec),
                layouts(&r.spec),
                r.ours,
                r.blas.1,
                r.blas.0,
                lt_cell(r.lt),
                r.percent(),
                diff_cell(r.rel_diff)
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn markdown_has_a_summary_and_a_table_per_variant() {
        let spec = GemmSpec::linear_forward(16384, 768, 768, Precision::Bf16);
        let row = |problem: &str, variant: &str, ours| Row {
            problem: problem.into(),
            spec,
            variant: variant.into(),
            ours,
            blas: ("cublasGemmEx", 400.0),
            lt: Some(500.0),
            best: ("cublasLt", 500.0),
            rel_diff: 1e-3,
        };
        let batched =
            GemmSpec { batch: 192, ..GemmSpec::linear_forward(1024, 64, 1024, spec.precision) };
        let tf32 = |problem, variant, ours| Row {
            spec: GemmSpec { precision: Precision::Tf32, ..spec },
            ..row(problem, variant, ours)
        };
        let rows = [
            row("attproj fwd", "BF16 mma.sync", 400.0),
            Row { rel_diff: f64::NAN, ..row("fc fwd + bias, GELU", "BF16 mma.sync", 100.0) },
            row("square", "BF16 mma.sync", 100.0),
            row("square 8192 K-major", "BF16 mma.sync", 100.0),
            Row { spec: batched, lt: None, ..row("attention PV", "BF16 mma.sync", 50.0) },
            row("attproj fwd", "BF16 wgmma", 450.0),
            tf32("attproj fwd", "TF32 mma.sync", 250.0),
        ];
        let meta = Meta {
            device: "H100".into(),
            device_name: "NVIDIA H100".into(),
            date: "2026-01-01".into(),
            commit: "abc1234".into(),
            warmup: 3,
            reps: 25,
            l2_bytes: 50 << 20,
        };
        let md = markdown(&meta, "13.0.2", &rows);
        assert!(md.contains("- Baselines (cuBLAS 13.0.2): FP32 = `cublasSgemm`"), "{md}");
        assert!(md.contains("| BF16 mma.sync | 1 | 80.0 | 80.0 | 80.0 |"), "{md}");
        assert!(md.contains("| attproj fwd | 16384×768×768 | rc | 400.0 | 400.0 (cublasGemmEx) | 500.0 | 80.0 | 1.0e-3 |"), "{md}");
        assert!(
            md.contains(
                "| attention PV | 192 × 1024×64×1024 | rc | 50.0 | 400.0 (cublasGemmEx) | – |"
            ),
            "{md}"
        );
        // Fused rows stay out of the summary (above: 1 problem) and show no NaN.
        assert!(md.contains("| fc fwd + bias, GELU | 16384×768×768 | rc | 100.0 |"), "{md}");
        assert!(md.contains("| 20.0 | – |\n"), "{md}");
        assert!(!md.contains("NaN"), "{md}");
        assert!(md.contains("## TF32 mma.sync"));
        assert!(md.contains("commit: `abc1234`"));
        assert!(md.contains("TMA rings: 128×128 6 stages, 128×256 4, ping-pong 6"), "{md}");
        // BF16 ran in two variants: side by side; TF32 in one: no such table.
        assert!(md.contains("## BF16 side by side (% of cuBLAS)\n\n| problem | layout | BF16 mma.sync | BF16 wgmma | fastest |\n|---|---|---:|---:|---|\n| attproj fwd | rc | 80.0 | 90.0 | BF16 wgmma |\n| fc fwd + bias, GELU | rc | 20.0 | – | BF16 mma.sync |\n| square | rc | 20.0 | – | BF16 mma.sync |\n| square 8192 K-major | rc | 20.0 | – | BF16 mma.sync |\n| attention PV | rc | 10.0 | – | BF16 mma.sync |\n"), "{md}");
        assert!(!md.contains("TF32 side by side"), "{md}");
        assert_eq!(
            headline(&rows),
            "geo-mean of cuBLAS on GPT-2 shapes: BF16 mma.sync 80%, BF16 wgmma 90%, TF32 mma.sync 50%"
        );
    }
}
