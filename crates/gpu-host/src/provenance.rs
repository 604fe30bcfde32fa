//! Where a measurement comes from: the names, dates and commits that benchmark reports record
//! (`bench/<benchmark>-<device slug>.md`, stamped with the UTC date and the source commit).

use std::time::{SystemTime, UNIX_EPOCH};

/// `NVIDIA H100 80GB HBM3` → `nvidia-h100-80gb-hbm3`.
pub fn device_slug(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_string()
}

/// `YYYY-MM-DD` (UTC) of `time`.
pub fn utc_date(time: SystemTime) -> String {
    let days = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The commit a report records: `GPU_BUNDLE_COMMIT` (set by the GPU bundle's `run.sh`, where
/// there is no repository), else `git rev-parse --short HEAD`; `None` when neither is there.
pub fn source_commit() -> Option<String> {
    if let Some(commit) = std::env::var_os("GPU_BUNDLE_COMMIT") {
        return Some(commit.to_string_lossy().into_owned());
    }
    let out = std::process::Command::new("git").args(["rev-parse", "--short", "HEAD"]).output();
    match out {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn slugs_and_dates() {
        assert_eq!(device_slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3");
        assert_eq!(device_slug("  NVIDIA H200 (x) "), "nvidia-h200-x");
        assert_eq!(utc_date(UNIX_EPOCH), "1970-01-01");
        assert_eq!(utc_date(UNIX_EPOCH + Duration::from_secs(1_709_251_200)), "2024-03-01");
    }
}
