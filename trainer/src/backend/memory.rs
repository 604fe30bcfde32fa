//! Sizes in words, and the host memory the CPU backend may still take.
//!
//! Linux overcommits: a `Vec` of 25 GiB is granted on a 24 GiB machine, and the process is
//! killed when the zeros are written. The CPU backend therefore compares each allocation with
//! `MemAvailable` first, so that a model too large for the host is an error naming the buffer;
//! training and benchmarking on a host-memory backend first compare the training state's lower
//! bound, so that a model far too large fails before minutes of initialisation.

/// `3.42 GiB` from 1 GiB up, else `12.5 MiB`.
pub(super) fn human_size(bytes: usize) -> String {
    let bytes = bytes as f64;
    if bytes >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", bytes / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes / (1u64 << 20) as f64)
    }
}

/// The host memory available to new allocations (`MemAvailable` of `/proc/meminfo`), or
/// `None` where the kernel does not say.
pub(super) fn host_available() -> Option<usize> {
    parse_mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn parse_mem_available(meminfo: &str) -> Option<usize> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let kib: usize = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// Fails, naming `what`, when `bytes` of host memory are not available (see the module docs);
/// passes where the kernel does not say how much is.
pub(crate) fn check_host_memory(what: &str, bytes: usize) -> crate::error::Result<()> {
    match host_shortfall(what, bytes, host_available()) {
        Some(message) => Err(crate::error::Error::Backend(message)),
        None => Ok(()),
    }
}

/// The least host memory that training `config` on `tokens` tokens a step takes on a backend
/// that keeps its buffers in host memory (the CPU backend, the simulator): the f32 parameters
/// twice (the host copy they start from and the backend's), their gradients, AdamW's two
/// moments, and the 18·C values per token and layer that the backward pass keeps, each of
/// `act_bytes` bytes. Logits, attention state and scratch come on top, so the real need is
/// larger; this bound is what makes a model far too large for the host fail at once rather
/// than after minutes of initialisation.
fn training_host_bytes(
    config: &crate::model::Gpt2Config,
    tokens: usize,
    act_bytes: usize,
) -> usize {
    let state = config.num_params().saturating_mul(5 * 4);
    let saved = (18 * config.channels)
        .saturating_mul(config.num_layers)
        .saturating_mul(tokens)
        .saturating_mul(act_bytes);
    state.saturating_add(saved)
}

/// On a backend that keeps its buffers in host memory (no GPU), fails at once when the host
/// cannot hold what training `config` takes at least, `held` bytes of it already loaded.
pub(crate) fn check_training_fits<B: super::Backend>(
    backend: &B,
    config: &crate::model::Gpt2Config,
    tokens: usize,
    held: usize,
) -> crate::error::Result<()> {
    if backend.gpu_name().is_some() {
        return Ok(());
    }
    config.validate()?;
    let need = training_host_bytes(config, tokens, size_of::<B::Act>());
    check_host_memory(
        &format!(
            "the training state of a {}-layer, {}-channel GPT-2 on {} (parameters, gradients, \
             AdamW moments, saved activations, at least)",
            config.num_layers,
            config.channels,
            backend.describe()
        ),
        need.saturating_sub(held),
    )
}

/// Why `bytes` for `what` cannot be allocated on a host with `available` bytes free, if so.
pub(super) fn host_shortfall(what: &str, bytes: usize, available: Option<usize>) -> Option<String> {
    let available = available?;
    (bytes > available).then(|| {
        format!(
            "out of host memory allocating {what}: {} requested, {} available; use a smaller \
             --model or --batch-size, or a GPU",
            human_size(bytes),
            human_size(available)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mem_available() {
        let meminfo = "MemTotal:       24608420 kB\nMemFree:         1200000 kB\n\
                       MemAvailable:   20000000 kB\nBuffers:          10000 kB\n";
        assert_eq!(parse_mem_available(meminfo), Some(20_000_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots\n"), None);
    }

    #[test]
    fn names_the_buffer_that_does_not_fit() {
        let gib = 1usize << 30;
        assert_eq!(host_shortfall("params", gib, Some(2 * gib)), None);
        assert_eq!(host_shortfall("params", 3 * gib, None), None);
        let message = host_shortfall("AdamW m", 6 * gib, Some(5 * gib)).unwrap();
        assert_eq!(
            message,
            "out of host memory allocating AdamW m: 6.00 GiB requested, 5.00 GiB available; use \
             a smaller --model or --batch-size, or a GPU"
        );
        assert_eq!(human_size(3 << 19), "1.5 MiB");
    }

    #[test]
    fn training_bound_counts_state_and_saved_activations() {
        let config = crate::model::Gpt2Config::gpt2_shape(12, 12, 768);
        let n = config.num_params();
        let per_token = 18 * 768 * 12;
        assert_eq!(training_host_bytes(&config, 1, 4), 20 * n + 4 * per_token);
        assert_eq!(training_host_bytes(&config, 1024, 2), 20 * n + 2 * 1024 * per_token);
        assert_eq!(training_host_bytes(&config, usize::MAX, 4), usize::MAX);
    }
}
