// Shared by the crate (`ptx::ptx_digest`), its build script and xtask's bundle (`include!`), so
// that the digest embedded at build time, the bundle's file names and the one a test computes
// are the same function.

/// The digest naming a PTX module's files: the first 16 hex digits of the SHA-256 of its text.
pub fn ptx_digest(text: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text);
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}
