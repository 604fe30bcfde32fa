//! GPT-2's BPE tokenizer (tiktoken's r50k_base, embedded in `tiktoken-rs`: no download).

use tiktoken_rs::CoreBPE;

/// The `<|endoftext|>` token: separates documents.
pub const EOT: u32 = 50_256;

/// Encodes text to GPT-2 token ids and back.
pub struct Tokenizer {
    bpe: &'static CoreBPE,
}

impl Default for Tokenizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Tokenizer {
    /// The GPT-2 tokenizer.
    pub fn new() -> Self {
        Self { bpe: tiktoken_rs::r50k_base_singleton() }
    }

    /// Token ids of `text`; special-token text such as `<|endoftext|>` is encoded as plain
    /// text.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.bpe.encode_ordinary(text)
    }

    /// The text of `tokens`; byte sequences that are not UTF-8 become U+FFFD, and ids the
    /// tokenizer does not know become `<|?|>`.
    pub fn decode(&self, tokens: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &tok in tokens {
            match self.bpe.decode_bytes(&[tok]) {
                Ok(piece) => bytes.extend(piece),
                Err(_) => bytes.extend(b"<|?|>"),
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_token_ids_round_trip() {
        let tok = Tokenizer::new();
        assert_eq!(tok.encode("Hello world"), [15496, 995]);
        let text = "To be, or not to be: that is the question.\nÆsop — 42";
        assert_eq!(tok.decode(&tok.encode(text)), text);
        assert_eq!(tok.decode(&[EOT]), "<|endoftext|>");
        assert_eq!(tok.decode(&[60_000]), "<|?|>");
    }
}
