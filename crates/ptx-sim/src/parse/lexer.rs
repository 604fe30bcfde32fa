//! Tokens of PTX source text, each with its line and byte range.

use super::ParseError;

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// Identifiers, directives, opcodes and registers, dots included: `ld.global.v4.u32`,
    /// `.reg`, `%tid.x`, `$L__BB1_2`, `shared::cta`.
    Ident(String),
    /// An integer literal (decimal, hex, octal or binary; a `U` suffix is dropped).
    Int(u64),
    /// A 32-bit float literal as bits (`0f3F800000`, or a decimal literal with a dot).
    F32(u32),
    /// A 64-bit float literal as bits (`0d3FF0000000000000`).
    F64(u64),
    /// One punctuation character: `{ } [ ] ( ) , ; : + - @ ! < > | =`.
    Punct(char),
}

/// A token and where it came from.
#[derive(Clone, Debug)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// 1-based source line.
    pub line: u32,
    /// Byte offset of the first character.
    pub start: usize,
    /// Byte offset one past the last character.
    pub end: usize,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || matches!(c, b'_' | b'$' | b'%' | b'.')
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.')
}

/// Splits `src` into tokens, dropping comments and `.loc`/`.file` debug lines.
pub fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1u32);
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if bytes[i..].starts_with(b"/*") {
            let end = src[i + 2..]
                .find("*/")
                .ok_or_else(|| ParseError::new(line, "unterminated /* comment"))?;
            line += src[i..i + 2 + end].matches('\n').count() as u32;
            i += end + 4;
        } else if c == b'"' {
            // Strings only occur in directives the simulator ignores (`.pragma "nounroll"`).
            let end = src[i + 1..]
                .find('"')
                .ok_or_else(|| ParseError::new(line, "unterminated string"))?;
            out.push(Token { tok: Tok::Ident(String::new()), line, start: i, end: i + end + 2 });
            i += end + 2;
        } else if is_ident_start(c) {
            let start = i;
            i += 1;
            while i < bytes.len() {
                if is_ident_char(bytes[i]) {
                    i += 1;
                } else if bytes[i..].starts_with(b"::") {
                    i += 2;
                } else {
                    break;
                }
            }
            let word = &src[start..i];
            if word == ".loc" || word == ".file" {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            out.push(Token { tok: Tok::Ident(word.to_string()), line, start, end: i });
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
            let tok = number(&src[start..i]).ok_or_else(|| {
                ParseError::new(line, format!("malformed number `{}`", &src[start..i]))
            })?;
            out.push(Token { tok, line, start, end: i });
        } else if b"{}[](),;:+-@!<>|=".contains(&c) {
            out.push(Token { tok: Tok::Punct(c as char), line, start: i, end: i + 1 });
            i += 1;
        } else {
            return Err(ParseError::new(line, format!("unexpected character `{}`", c as char)));
        }
    }
    Ok(out)
}

/// Parses one numeric literal.
fn number(text: &str) -> Option<Tok> {
    let lower = text.to_ascii_lowercase();
    if let Some(hex) = lower.strip_prefix("0f") {
        return (hex.len() == 8).then(|| u32::from_str_radix(hex, 16).ok().map(Tok::F32))?;
    }
    if let Some(hex) = lower.strip_prefix("0d") {
        return (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok().map(Tok::F64))?;
    }
    if lower.contains('.') || (lower.contains('e') && !lower.starts_with("0x")) {
        return lower.parse::<f64>().ok().map(|v| Tok::F64(v.to_bits()));
    }
    let digits = lower.strip_suffix('u').unwrap_or(&lower);
    let value = if let Some(hex) = digits.strip_prefix("0x") {
        u64::from_str_radix(hex, 16).ok()?
    } else if let Some(bin) = digits.strip_prefix("0b") {
        u64::from_str_radix(bin, 2).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        u64::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits.parse().ok()?
    };
    Some(Tok::Int(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        tokenize(src).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn splits_instructions_and_operands() {
        let id = |s: &str| Tok::Ident(s.into());
        assert_eq!(
            toks("@!%p1 ld.global.v4.u32 {%r5, _}, [%rd6+-4]; // c"),
            vec![
                Tok::Punct('@'),
                Tok::Punct('!'),
                id("%p1"),
                id("ld.global.v4.u32"),
                Tok::Punct('{'),
                id("%r5"),
                Tok::Punct(','),
                id("_"),
                Tok::Punct('}'),
                Tok::Punct(','),
                Tok::Punct('['),
                id("%rd6"),
                Tok::Punct('+'),
                Tok::Punct('-'),
                Tok::Int(4),
                Tok::Punct(']'),
                Tok::Punct(';'),
            ]
        );
        assert_eq!(toks("ldmatrix.shared::cta.b16"), vec![id("ldmatrix.shared::cta.b16")]);
        assert_eq!(toks("$L__BB1_2:"), vec![id("$L__BB1_2"), Tok::Punct(':')]);
    }

    #[test]
    fn reads_every_literal_form() {
        assert_eq!(
            toks("0x1f 017 0b101 42U"),
            vec![Tok::Int(31), Tok::Int(15), Tok::Int(5), Tok::Int(42)]
        );
        assert_eq!(toks("0f3F800000"), vec![Tok::F32(0x3f80_0000)]);
        assert_eq!(toks("0d3FF0000000000000"), vec![Tok::F64(1f64.to_bits())]);
        assert_eq!(toks("1.5"), vec![Tok::F64(1.5f64.to_bits())]);
    }

    #[test]
    fn counts_lines_across_comments() {
        let t = tokenize("a /* x\ny */ b\n// z\nc").unwrap();
        assert_eq!(t.iter().map(|t| t.line).collect::<Vec<_>>(), vec![1, 2, 4]);
    }
}
