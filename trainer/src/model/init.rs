//! GPT-2 initialisation, on the host.

use super::{Gpt2Config, ParamKind, Params};
use crate::backend::check_host_memory;
use crate::error::Result;
use crate::rng;
use rayon::prelude::*;

/// Standard deviation of GPT-2's weight initialisation.
pub const INIT_STD: f32 = 0.02;
const CHUNK: usize = 1 << 16;

/// Fresh GPT-2 parameters: embeddings and linear weights N(0, 0.02), the residual
/// projections (`attprojw`, `fcprojw`) N(0, 0.02 / sqrt(2L)), biases 0, layernorm weights 1.
/// The padded rows `V..Vp` of `wte` are 0 (no token ever selects them and their logits are
/// ignored). Each 64Ki-element chunk of each tensor draws from its own stream of `seed`, so
/// the result does not depend on the thread count.
pub fn gpt2_init(config: &Gpt2Config, seed: u64) -> Params<Vec<f32>> {
    let residual_std = INIT_STD / (2.0 * config.num_layers as f32).sqrt();
    Params::from_fn(|kind| {
        let len = kind.len(config);
        let std = match kind {
            ParamKind::Wte | ParamKind::Wpe | ParamKind::Qkvw | ParamKind::Fcw => INIT_STD,
            ParamKind::Attprojw | ParamKind::Fcprojw => residual_std,
            ParamKind::Ln1w | ParamKind::Ln2w | ParamKind::Lnfw => return vec![1.0; len],
            _ => return vec![0.0; len],
        };
        let real = if kind == ParamKind::Wte { config.vocab_size * config.channels } else { len };
        let mut values = vec![0.0f32; len];
        values[..real].par_chunks_mut(CHUNK).enumerate().for_each(|(chunk, out)| {
            let mut stream =
                rng::stream(seed, &[rng::family::INIT, kind.index() as u64, chunk as u64]);
            rng::fill_normal(&mut stream, out);
            out.iter_mut().for_each(|x| *x *= std);
        });
        values
    })
}

/// [`gpt2_init`] of a model that [`Gpt2Config::validate`] accepts and whose parameters fit
/// the host's available memory; otherwise an error naming what is wrong, before anything is
/// allocated.
pub fn checked_init(config: &Gpt2Config, seed: u64) -> Result<Params<Vec<f32>>> {
    config.validate()?;
    check_host_memory("the model's parameters", config.num_params().saturating_mul(4))?;
    Ok(gpt2_init(config, seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_gpt2_scheme() {
        let config = Gpt2Config {
            max_seq_len: 16,
            vocab_size: 250,
            padded_vocab_size: 256,
            num_layers: 8,
            num_heads: 2,
            channels: 64,
        };
        let params = gpt2_init(&config, 3);
        let std = |x: &[f32]| (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt();
        let wte = &params[ParamKind::Wte];
        assert!((std(&wte[..250 * 64]) - 0.02).abs() < 0.001);
        assert!(wte[250 * 64..].iter().all(|&x| x == 0.0), "padded rows must be zero");
        assert!((std(&params[ParamKind::Fcprojw]) - 0.02 / 4.0).abs() < 0.0005);
        assert!(params[ParamKind::Ln2w].iter().all(|&x| x == 1.0));
        assert!(params[ParamKind::Qkvb].iter().all(|&x| x == 0.0));
        assert_eq!(params, gpt2_init(&config, 3));
        assert_ne!(params, gpt2_init(&config, 4));
    }
}
