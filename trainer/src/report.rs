//! What the markdown reports of `trainer bench` and `trainer ladder` share, and the digit
//! grouping of every count the trainer prints.

/// Facts a report records besides its figures.
pub struct ReportMeta<'a> {
    /// UTC date.
    pub date: &'a str,
    /// Source commit.
    pub commit: &'a str,
    /// The command that produced it.
    pub command: &'a str,
}

/// `n` with thousands separators: `1409401` → `1,409,401`.
pub fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `x` rounded to an integer, with thousands separators: `171,234`.
pub fn thousands(x: f64) -> String {
    group_digits(x.round() as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_groups_digits() {
        assert_eq!(super::thousands(171_234.4), "171,234");
        assert_eq!(super::thousands(999.5), "1,000");
        assert_eq!(super::thousands(12.0), "12");
        assert_eq!(super::group_digits(1_409_401), "1,409,401");
        assert_eq!(super::group_digits(0), "0");
    }
}
