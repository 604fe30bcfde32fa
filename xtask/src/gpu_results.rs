//! `cargo xtask gpu-results RUN...`: brings a GPU session's results home (docs/GPU.md).
//!
//! Each RUN is an archive written by `run.sh --archive` (or a results folder, unpacked). Every
//! report under the runs' `bench/` is copied into the repository's `bench/`, and each run
//! leaves a record in `bench/gpu-runs/<started>-<name>/` (its `summary.md`, and the `info` and
//! `sim_vs_gpu` logs). `bench/gpu-validation.md` is then written from every record there, of
//! this session and of the earlier ones (a GPU lease is too short for every stage, so the
//! validation accumulates over sessions): the GPU and bundle of each run, every step's result
//! (a later run's row replaces an earlier one's for the same step, so a stage rerun after a
//! fix supersedes the failure), the stages no run has reached yet, sim_vs_gpu's largest
//! differences, the sanitizer's tally, and the reports imported. With no RUN, only
//! `gpu-validation.md` is rebuilt, from the records (after a record was edited by hand).

use crate::cmd::{self, workspace_root};
use anyhow::{Context, Result, bail};
use std::fmt::Write;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The stages of `run.sh`, in the order it runs them.
const STAGES: [&str; 7] = ["info", "tests", "sanitize", "bench", "train", "ladder", "profile"];

/// The logs a run's record keeps beside its summary (small, and quoted by the validation).
const RECORDED_LOGS: [&str; 2] = ["info.log", "tests-sim_vs_gpu.log"];

/// The profile stage's logs (Nsight Compute's reports) start with this: the record keeps them
/// too, for the findings to quote.
const PROFILE_LOG_PREFIX: &str = "profile-";

/// The file of a run's record that names the reports the run wrote, one per line.
const REPORT_LIST: &str = "reports.txt";

/// Imports `runs` (oldest first): copies their reports into `bench_dir` (default: the
/// repository's `bench/`) and writes `bench_dir/gpu-validation.md`.
pub fn run(runs: &[PathBuf], bench_dir: Option<PathBuf>) -> Result<()> {
    let bench_dir = bench_dir.unwrap_or_else(|| workspace_root().join("bench"));
    let scratch = std::env::temp_dir().join(format!("gpu-results-{}", std::process::id()));
    let result = import(runs, &bench_dir, &scratch);
    let _ = fs::remove_dir_all(&scratch);
    let Imported { validation, reports, tally } = result?;
    println!("gpu-results: wrote {}", validation.display());
    for line in tally {
        println!("gpu-results: {line}.");
    }
    for report in reports {
        println!("gpu-results: imported {}", report.display());
    }
    println!("gpu-results: read them through, then commit them (docs/GPU.md)");
    Ok(())
}

/// What [`import`] wrote.
struct Imported {
    /// `gpu-validation.md`.
    validation: PathBuf,
    /// The reports copied into the bench folder.
    reports: Vec<PathBuf>,
    /// The validation's tally over every recorded run ([`tally`]).
    tally: [String; 2],
}

/// Reads every run first, so that one bad archive leaves the bench folder untouched, then
/// copies their reports and records and rebuilds the validation.
fn import(runs: &[PathBuf], bench_dir: &Path, scratch: &Path) -> Result<Imported> {
    if bench_dir.exists() && !bench_dir.is_dir() {
        bail!("--bench-dir {} exists and is not a directory", bench_dir.display());
    }
    let records = bench_dir.join("gpu-runs");
    for path in runs {
        // A record is rewritten from its run: read from the record itself, it would be
        // removed before it is copied.
        if let (Ok(run), Ok(records)) = (path.canonicalize(), records.canonicalize())
            && run.starts_with(&records)
        {
            bail!(
                "{} is a record under {}, not a run's results: import the archive or results \
                 folder it came from (with no runs, gpu-results rebuilds the validation from \
                 the records)",
                path.display(),
                records.display()
            );
        }
    }
    let read: Vec<Run> = runs
        .iter()
        .enumerate()
        .map(|(i, path)| Run::read(path, &results_folder(path, &scratch.join(i.to_string()))?))
        .collect::<Result<_>>()?;
    let mut reports = Vec::new();
    for run in &read {
        reports.extend(copy_reports(run, bench_dir)?);
        keep_record(run, &records)?;
    }
    reports.sort();
    reports.dedup();
    let all = recorded_runs(&records)?;
    let rows = merged_rows(&all);
    let tally = tally(&rows);
    let text = validation_markdown(&all, &rows, &tally, &today()?);
    let validation = bench_dir.join("gpu-validation.md");
    cmd::write_atomic(&validation, text.as_bytes())?;
    Ok(Imported { validation, reports, tally })
}

/// Copies `run`'s summary, [`RECORDED_LOGS`] and profile logs into `records/<its id>/`, with
/// the names of the reports it wrote in `reports.txt` (replacing an earlier import of the same
/// run).
fn keep_record(run: &Run, records: &Path) -> Result<()> {
    let record = records.join(run.record_id());
    if record.exists() {
        fs::remove_dir_all(&record).with_context(|| format!("removing {}", record.display()))?;
    }
    let list: String = run.reports.iter().map(|name| format!("{name}\n")).collect();
    cmd::write_atomic(&record.join(REPORT_LIST), list.as_bytes())?;
    let mut profiles: Vec<String> = fs::read_dir(run.folder.join("logs"))
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(PROFILE_LOG_PREFIX) && name.ends_with(".log"))
        .collect();
    profiles.sort();
    let files = std::iter::once("summary.md".to_string())
        .chain(RECORDED_LOGS.iter().map(|log| format!("logs/{log}")))
        .chain(profiles.iter().map(|log| format!("logs/{log}")));
    for file in files {
        let source = run.folder.join(&file);
        if source.is_file() {
            let bytes =
                fs::read(&source).with_context(|| format!("reading {}", source.display()))?;
            cmd::write_atomic(&record.join(&file), &bytes)?;
        }
    }
    Ok(())
}

/// Every run recorded under `records`, oldest first (record ids begin with the start time).
fn recorded_runs(records: &Path) -> Result<Vec<Run>> {
    let mut folders = Vec::new();
    for entry in fs::read_dir(records).with_context(|| format!("reading {}", records.display()))? {
        let folder = entry?.path();
        if folder.join("summary.md").is_file() {
            folders.push(folder);
        }
    }
    folders.sort();
    folders.iter().map(|folder| Run::read(folder, folder)).collect()
}

/// The results folder of `path`: itself when it is a folder holding `summary.md`, else the
/// folder its archive unpacks to under `into`.
fn results_folder(path: &Path, into: &Path) -> Result<PathBuf> {
    if path.is_dir() {
        if path.join("summary.md").is_file() {
            return Ok(path.to_path_buf());
        }
        bail!("{} is a folder without summary.md: not a run.sh results folder", path.display());
    }
    if !path.is_file() {
        bail!("{}: no such archive or folder", path.display());
    }
    if into.exists() {
        fs::remove_dir_all(into).with_context(|| format!("emptying {}", into.display()))?;
    }
    fs::create_dir_all(into).with_context(|| format!("creating {}", into.display()))?;
    cmd::output(Command::new("tar").arg("-xzf").arg(path).arg("-C").arg(into))
        .with_context(|| format!("unpacking {}", path.display()))?;
    let mut found = Vec::new();
    for entry in fs::read_dir(into)? {
        let dir = entry?.path();
        if dir.join("summary.md").is_file() {
            found.push(dir);
        }
    }
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!("{} holds no */summary.md: not a `run.sh --archive` archive", path.display()),
        _ => bail!("{} holds several results folders; unpack it and name each", path.display()),
    }
}

/// One run of `run.sh`, from its summary.
struct Run {
    /// The archive or folder it was read from (as named on the command line).
    name: String,
    /// Its unpacked results folder.
    folder: PathBuf,
    /// `name, driver, compute capability` as nvidia-smi gave them.
    gpu: String,
    /// When it started, and the stages (and budget) it was given.
    started: String,
    /// The bundle's manifest line (commit, dirty, built).
    bundle: String,
    rows: Vec<Row>,
    /// The file names of the reports it wrote under `bench/`.
    reports: Vec<String>,
}

/// One row of a summary's table, cells as written (markdown, `|` escaped).
#[derive(Clone, Debug, PartialEq)]
struct Row {
    stage: String,
    step: String,
    result: String,
    seconds: String,
    headline: String,
}

impl Row {
    fn passed(&self) -> bool {
        self.result == "pass"
    }

    fn failed(&self) -> bool {
        self.result.starts_with("FAIL")
    }
}

impl Run {
    /// The folder name of its record: start time and name, `2026-11-25-2303-call1`.
    fn record_id(&self) -> String {
        let when = self.started.split(';').next().unwrap_or_default().trim_end_matches("UTC");
        let when: String = when
            .trim()
            .chars()
            .filter_map(|c| match c {
                '0'..='9' | '-' => Some(c),
                ' ' => Some('-'),
                _ => None,
            })
            .collect();
        let name = self.name.trim_end_matches(".tar.gz").trim_end_matches(".tgz");
        let name: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
            .collect();
        let when = if when.is_empty() { "undated" } else { &when };
        match name.starts_with(&format!("{when}-")) {
            true => name,
            false => format!("{when}-{name}"),
        }
    }

    fn read(path: &Path, folder: &Path) -> Result<Self> {
        let summary_path = folder.join("summary.md");
        let summary = fs::read_to_string(&summary_path)
            .with_context(|| format!("reading {}", summary_path.display()))?;
        let field = |prefix: &str| {
            summary.lines().find_map(|l| l.strip_prefix(prefix)).map(str::trim).unwrap_or_default()
        };
        let gpu = field("- GPU: ").trim_end_matches("(name, driver, compute capability)").trim();
        let mut rows = Vec::new();
        let mut in_table = false;
        for line in summary.lines() {
            if line.starts_with("| stage | step |") {
                in_table = true;
            } else if in_table && line.starts_with("| ") {
                let cells = split_row(line);
                let [stage, step, result, seconds, headline] = cells.as_slice() else {
                    bail!("{}: a table row without 5 cells: {line}", summary_path.display());
                };
                rows.push(Row {
                    stage: stage.clone(),
                    step: step.clone(),
                    result: result.clone(),
                    seconds: seconds.clone(),
                    headline: headline.clone(),
                });
            }
        }
        if !in_table {
            bail!("{} has no step table: not written by run.sh", summary_path.display());
        }
        let mut reports = Vec::new();
        if let Ok(entries) = fs::read_dir(folder.join("bench")) {
            for entry in entries {
                let path = entry?.path();
                if path.is_file() {
                    reports.extend(path.file_name().map(|n| n.to_string_lossy().into_owned()));
                }
            }
        } else if let Ok(list) = fs::read_to_string(folder.join(REPORT_LIST)) {
            reports.extend(list.lines().filter(|l| !l.is_empty()).map(str::to_string));
        }
        reports.sort();
        Ok(Run {
            name: path
                .file_name()
                .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into()),
            folder: folder.to_path_buf(),
            gpu: gpu.to_string(),
            started: field("- Started: ").to_string(),
            bundle: field("- Bundle: ").to_string(),
            rows,
            reports,
        })
    }
}

/// The cells of a markdown table row, trimmed; `\|` stays inside its cell.
fn split_row(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push_str("\\|");
                chars.next();
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells.iter().map(|c| c.trim().to_string()).collect()
}

/// Every step of every run, later runs replacing earlier rows of the same step, except that a
/// step a later run did not finish (budget, interruption) keeps an earlier finished result.
/// Each row comes with the number (from 1) of the run it is from.
fn merged_rows(runs: &[Run]) -> Vec<(Row, usize)> {
    let mut merged: Vec<(Row, usize)> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        for row in &run.rows {
            let finished = row.passed() || row.failed();
            match merged.iter_mut().find(|(r, _)| r.stage == row.stage && r.step == row.step) {
                Some(slot) if finished || !(slot.0.passed() || slot.0.failed()) => {
                    *slot = (row.clone(), i + 1);
                }
                Some(_) => {}
                None => merged.push((row.clone(), i + 1)),
            }
        }
    }
    merged.sort_by_key(|(r, _)| STAGES.iter().position(|s| *s == r.stage).unwrap_or(STAGES.len()));
    merged
}

/// sim_vs_gpu's `largest ...` lines from the latest run that ran it.
fn sim_vs_gpu_lines(runs: &[Run]) -> Option<(usize, Vec<String>)> {
    runs.iter().enumerate().rev().find_map(|(i, run)| {
        let log = fs::read_to_string(run.folder.join("logs/tests-sim_vs_gpu.log")).ok()?;
        let lines: Vec<String> = log
            .lines()
            .filter(|l| l.starts_with("sim_vs_gpu:") && l.contains("largest"))
            .map(str::to_string)
            .collect();
        Some((i + 1, lines))
    })
}

/// The sanitizer section's sentence: how many tool × binary steps passed with a clean
/// summary, passed without one, failed or did not finish.
fn sanitizer_tally(sanitize: &[&Row]) -> String {
    if sanitize.is_empty() {
        return "The sanitizer stage did not run.\n".into();
    }
    // memcheck, synccheck and initcheck end with `ERROR SUMMARY: 0 errors`, racecheck with
    // `RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)`: clean at E = 0.
    let is_clean = |h: &str| {
        h.contains("ERROR SUMMARY: 0 errors")
            || (h.contains("RACECHECK SUMMARY: ") && h.contains(" displayed (0 errors, "))
    };
    let clean = sanitize.iter().filter(|r| r.passed() && is_clean(&r.headline)).count();
    let passed = sanitize.iter().filter(|r| r.passed()).count();
    let failed = sanitize.iter().filter(|r| r.failed()).count();
    format!(
        "{} tool × test-binary steps at the tests' small sizes (rows above): {clean} passed with \
         a summary of 0 errors (racecheck's warnings aside), {} passed without a summary line \
         read (run.sh read only memcheck's form before 2026-11-26), {failed} failed, {} not \
         finished.\n",
        sanitize.len(),
        passed - clean,
        sanitize.len() - passed - failed
    )
}

/// The two lines that sum up `rows`: how many steps passed, failed and did not finish, and
/// the stages no run has finished a step of yet.
fn tally(rows: &[(Row, usize)]) -> [String; 2] {
    let count = |f: &dyn Fn(&Row) -> bool| rows.iter().filter(|(r, _)| f(r)).count();
    let (passed, failed) = (count(&Row::passed), count(&Row::failed));
    let unfinished = rows.len() - passed - failed;
    let reached =
        |stage: &&str| rows.iter().any(|(r, _)| r.stage == *stage && (r.passed() || r.failed()));
    let not_reached: Vec<&str> = STAGES.into_iter().filter(|s| !reached(s)).collect();
    let stages = if not_reached.is_empty() { "none".to_string() } else { not_reached.join(", ") };
    [
        format!("{passed} steps passed, {failed} failed, {unfinished} not finished"),
        format!("Stages no run has finished a step of yet: {stages}"),
    ]
}

/// The validation of `runs`, whose [`merged_rows`] are `rows` and [`tally`] is `tally`.
fn validation_markdown(
    runs: &[Run],
    rows: &[(Row, usize)],
    [steps, stages]: &[String; 2],
    date: &str,
) -> String {
    let mut gpus: Vec<&str> = runs.iter().map(|r| r.gpu.as_str()).collect();
    gpus.sort_unstable();
    gpus.dedup();
    let mut s = format!(
        "# GPU validation: {}\n\n\
         - GPU (name, driver, compute capability): {}\n\
         - Written {date} by `cargo xtask gpu-results` from the {} run(s) of the GPU bundle's \
         `run.sh` recorded under `gpu-runs/` (docs/GPU.md), listed below; each step's row is \
         from the latest run that finished it.\n\
         - **{steps}** (stopped or not run for the budget, or interrupted).\n\
         - **{stages}.**\n\n\
         | run | record | GPU | started (UTC); stages | bundle |\n|---:|---|---|---|---|\n",
        gpus.join(" / "),
        gpus.join(" / "),
        runs.len(),
    );
    for (i, run) in runs.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | `{}` | {} | {} | {} |",
            i + 1,
            run.record_id(),
            run.gpu,
            run.started,
            run.bundle
        );
    }
    s += "\n## Steps\n\n| stage | step | result | seconds | headline | run |\n\
          |---|---|---|---:|---|---:|\n";
    for (r, run) in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {run} |",
            r.stage, r.step, r.result, r.seconds, r.headline
        );
    }
    s += "\n## sim_vs_gpu: largest differences, simulator against hardware\n\n";
    match sim_vs_gpu_lines(runs) {
        Some((run, lines)) if !lines.is_empty() => {
            let _ = writeln!(s, "From run {run} (`logs/tests-sim_vs_gpu.log`):\n\n```text");
            for line in lines {
                s += &line;
                s.push('\n');
            }
            s += "```\n";
        }
        Some((run, _)) => {
            let _ = writeln!(s, "Run {run} ran sim_vs_gpu, but its log reports no differences.");
        }
        None => s += "sim_vs_gpu did not run.\n",
    }
    let sanitize: Vec<&Row> =
        rows.iter().map(|(r, _)| r).filter(|r| r.stage == "sanitize").collect();
    s += "\n## compute-sanitizer\n\n";
    s += &sanitizer_tally(&sanitize);
    s += "\n## Reports the runs wrote\n\n";
    let mut reports: Vec<&String> = runs.iter().flat_map(|run| &run.reports).collect();
    reports.sort();
    reports.dedup();
    if reports.is_empty() {
        s += "None: no run wrote a report under `bench/`.\n";
    }
    for name in reports {
        let _ = writeln!(s, "- [`bench/{name}`]({name})");
    }
    s
}

/// Copies the reports `run` wrote (its `bench/`, where it has one) into `to`; returns the
/// copies.
fn copy_reports(run: &Run, to: &Path) -> Result<Vec<PathBuf>> {
    let mut copied = Vec::new();
    for name in &run.reports {
        let source = run.folder.join("bench").join(name);
        if !source.is_file() {
            continue; // a record: its reports are in the repository already
        }
        let target = to.join(name);
        let bytes = fs::read(&source).with_context(|| format!("reading {}", source.display()))?;
        cmd::write_atomic(&target, &bytes)?;
        copied.push(target);
    }
    Ok(copied)
}

/// Today's date (UTC), `YYYY-MM-DD`.
fn today() -> Result<String> {
    Ok(cmd::output(Command::new("date").args(["-u", "+%Y-%m-%d"]))?.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu_bundle::run_sh_tests::{FakeBundle, has_row, text};

    fn row(stage: &str, step: &str, result: &str) -> Row {
        let cell = String::from;
        Row {
            stage: cell(stage),
            step: cell(step),
            result: cell(result),
            seconds: cell("1"),
            headline: String::new(),
        }
    }

    /// A later run's finished row replaces an earlier one; an unfinished one does not replace
    /// a finished one; rows come out in stage order.
    #[test]
    fn later_finished_rows_win() {
        let run = |rows: Vec<Row>| Run {
            name: "x".into(),
            folder: PathBuf::new(),
            gpu: String::new(),
            started: String::new(),
            bundle: String::new(),
            rows,
            reports: Vec::new(),
        };
        let runs = [
            run(vec![
                row("tests", "a gpu::", "FAIL (exit 101)"),
                row("tests", "b gpu::", "pass"),
                row("bench", "gemm", "not run (budget spent)"),
            ]),
            run(vec![
                row("info", "gpu-bench info", "pass"),
                row("tests", "a gpu::", "pass"),
                row("tests", "b gpu::", "stopped by the budget after 9s"),
                row("bench", "gemm", "pass"),
            ]),
        ];
        let merged: Vec<(String, String, usize)> =
            merged_rows(&runs).into_iter().map(|(r, run)| (r.step, r.result, run)).collect();
        let want = [
            ("gpu-bench info", "pass", 2),
            ("a gpu::", "pass", 2),
            ("b gpu::", "pass", 1),
            ("gemm", "pass", 2),
        ];
        let want: Vec<(String, String, usize)> =
            want.iter().map(|&(s, r, n)| (s.into(), r.into(), n)).collect();
        assert_eq!(merged, want);
    }

    #[test]
    fn the_sanitizer_tally_counts_each_tools_clean_summary() {
        let row = |result: &str, headline: &str| Row {
            stage: "sanitize".into(),
            step: "tool binary".into(),
            result: result.into(),
            seconds: "1".into(),
            headline: headline.into(),
        };
        let rows = [
            row("pass", "ERROR SUMMARY: 0 errors; 6 passed, 0 failed"),
            row("pass", "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings); 6 passed"),
            row("pass", "RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings); 6 passed"),
            row("pass", "no ERROR SUMMARY line; 6 passed, 0 failed"),
            row("FAIL (exit 99)", "ERROR SUMMARY: 23 errors; 33 passed, 18 failed"),
            row("not run (budget spent)", ""),
        ];
        let rows: Vec<&Row> = rows.iter().collect();
        let tally = sanitizer_tally(&rows);
        assert!(tally.starts_with("6 tool × test-binary steps"), "{tally}");
        assert!(tally.contains(": 3 passed with a summary of 0 errors"), "{tally}");
        assert!(tally.contains(", 1 passed without a summary line read"), "{tally}");
        assert!(tally.contains(", 1 failed, 1 not finished."), "{tally}");
        assert_eq!(sanitizer_tally(&[]), "The sanitizer stage did not run.\n");
    }

    #[test]
    fn escaped_pipes_stay_in_their_cell() {
        let cells = split_row(r"| tests | sim_vs_gpu | pass | 3 | of sum\|a*b\| ok |");
        assert_eq!(cells, ["tests", "sim_vs_gpu", "pass", "3", r"of sum\|a*b\| ok"]);
    }

    /// Two archives from the fake bundle (the second reruns a failed test binary after a
    /// "fix"): the reports land in bench/, and gpu-validation.md lists both runs, takes the
    /// rerun's result, names the stages not reached, quotes sim_vs_gpu's lines and tallies the
    /// outcome.
    #[test]
    fn two_runs_make_one_validation_report() {
        let fake = FakeBundle::new("gpu-results");
        let first = ["info", "tests", "--out", "r1", "--archive", "one.tar.gz"];
        let out = fake.run(&first, &[("TESTS", "bad gemm sim_vs_gpu")]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let second = ["tests", "bench", "--out", "r2", "--archive", "two.tar.gz"];
        let out = fake.run(&second, &[("TESTS", "bad"), ("FIXED", "1"), ("BENCHMARKS", "gemm")]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let bench = fake.path("repo-bench");
        let runs = [fake.path("one.tar.gz"), fake.path("two.tar.gz")];
        let Imported { validation, reports, .. } =
            import(&runs, &bench, &fake.path("scratch")).unwrap();
        assert_eq!(reports, [bench.join("gemm-fake.md")]);
        let md = fs::read_to_string(validation).unwrap();
        assert!(md.starts_with("# GPU validation: Fake GPU, 0.0, 9.0\n"), "{md}");
        assert!(md.contains("-one` | Fake GPU, 0.0, 9.0 | "), "{md}");
        assert!(md.contains("-two` | Fake GPU, 0.0, 9.0 | "), "{md}");
        assert!(
            md.contains(
                "**Stages no run has finished a step of yet: sanitize, train, ladder, profile.**"
            ),
            "{md}"
        );
        assert!(md.contains("**5 steps passed, 0 failed, 0 not finished**"), "{md}");
        let bad = has_row(&md, &["tests", "bad gpu::", "pass"], &["2 passed, 0 failed", "2"]);
        assert!(bad, "{md}");
        let gemm = "2 passed, 0 failed; kernel tests on Fake GPU";
        assert!(has_row(&md, &["tests", "gemm gpu::", "pass"], &[gemm, "1"]), "{md}");
        assert!(md.contains("sim_vs_gpu: wgmma_tf32: largest difference 1.50e-07"), "{md}");
        assert!(md.contains("The sanitizer stage did not run."), "{md}");
        assert!(md.contains("- [`bench/gemm-fake.md`](gemm-fake.md)"), "{md}");
        let err =
            import(&[fake.path("r1/logs")], &bench, &fake.path("scratch")).err().expect("an error");
        assert!(err.to_string().contains("without summary.md"), "{err}");
        // One bad archive among good ones leaves the bench folder as it was.
        let fresh = fake.path("untouched-bench");
        let mixed = [fake.path("one.tar.gz"), fake.path("r1/logs")];
        assert!(import(&mixed, &fresh, &fake.path("scratch")).is_err());
        assert!(!fresh.exists(), "nothing is copied before every run has been read");
    }

    /// Sessions accumulate: a second session's import keeps the first session's run (from its
    /// record under gpu-runs/, with its sim_vs_gpu lines and reports), and importing the same
    /// archive again replaces its record instead of adding one.
    #[test]
    fn validation_accumulates_over_sessions() {
        let fake = FakeBundle::new("gpu-results-sessions");
        let out = fake.run(
            &["info", "tests", "bench", "profile", "--out", "r1", "--archive", "one.tar.gz"],
            &[
                ("TESTS", "gemm sim_vs_gpu"),
                ("BENCHMARKS", "gemm"),
                ("PROFILE_STEP", "^gemm_wgmma@1"),
                ("PROFILE_GEMMS", "qkv fwd"),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let out =
            fake.run(&["tests", "--out", "r2", "--archive", "two.tar.gz"], &[("TESTS", "bad")]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let bench = fake.path("repo-bench");
        let scratch = fake.path("scratch");
        import(&[fake.path("one.tar.gz")], &bench, &scratch).unwrap();
        import(&[fake.path("two.tar.gz")], &bench, &scratch).unwrap();
        let Imported { validation, .. } =
            import(&[fake.path("two.tar.gz")], &bench, &scratch).unwrap();
        let records: Vec<String> = fs::read_dir(bench.join("gpu-runs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(records.len(), 2, "{records:?}");
        let md = fs::read_to_string(validation).unwrap();
        assert!(md.contains("from the 2 run(s)"), "{md}");
        assert!(md.contains("**6 steps passed, 1 failed, 0 not finished**"), "{md}");
        assert!(
            md.contains("**Stages no run has finished a step of yet: sanitize, train, ladder.**"),
            "{md}"
        );
        let profiled = records.iter().any(|r| {
            bench.join("gpu-runs").join(r).join("logs/profile-gemm-qkv_fwd.log").is_file()
        });
        assert!(profiled, "the profile logs are kept in the record");
        let gemm = ["2 passed, 0 failed; kernel tests on Fake GPU", "1"];
        assert!(has_row(&md, &["tests", "gemm gpu::", "pass"], &gemm), "{md}");
        let bad = ["1 passed, 1 failed", "2"];
        assert!(has_row(&md, &["tests", "bad gpu::", "FAIL (exit 101)"], &bad), "{md}");
        assert!(md.contains("sim_vs_gpu: wgmma_tf32: largest difference 1.50e-07"), "{md}");
        assert!(md.contains("- [`bench/gemm-fake.md`](gemm-fake.md)"), "{md}");
        // No runs: the validation is rebuilt from the records alone, the same.
        fs::remove_file(bench.join("gpu-validation.md")).unwrap();
        let Imported { validation, reports, .. } = import(&[], &bench, &scratch).unwrap();
        assert!(reports.is_empty());
        let rebuilt = fs::read_to_string(validation).unwrap();
        assert_eq!(rebuilt, md);
        // A record is not a run: importing one would remove it before reading it.
        let record = bench.join("gpu-runs").join(&records[0]);
        let err = import(std::slice::from_ref(&record), &bench, &scratch).err().expect("an error");
        assert!(err.to_string().contains("is a record under"), "{err}");
        assert!(record.join("summary.md").is_file(), "the record is intact");
    }
}
