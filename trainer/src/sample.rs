//! Text generation from a model: temperature and top-k sampling, one token at a time.

use crate::backend::{Backend, TokenShape};
use crate::data::EOT;
use crate::error::{Error, Result};
use crate::model::{Activations, Gpt2};
use crate::rng;
use cpu_ref::precision::Element as _;
use rand::RngExt;

/// How to sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleOptions {
    /// Tokens to generate.
    pub max_tokens: usize,
    /// Softmax temperature; 0 picks the most likely token.
    pub temperature: f32,
    /// Sample among the k most likely tokens only; 0 for all.
    pub top_k: usize,
    /// Seed of the sampling stream.
    pub seed: u64,
}

/// Picks a token from `logits` (the real vocabulary) as `opts` says.
fn pick(logits: &[f32], opts: &SampleOptions, stream: &mut rand_pcg::Pcg64) -> u32 {
    let argmax = || {
        logits
            .iter()
            .enumerate()
            .fold((0, f32::NEG_INFINITY), |best, (i, &x)| if x > best.1 { (i, x) } else { best })
    };
    if opts.temperature == 0.0 {
        return argmax().0 as u32;
    }
    let mut order: Vec<usize> = (0..logits.len()).collect();
    if opts.top_k > 0 && opts.top_k < logits.len() {
        order.select_nth_unstable_by(opts.top_k - 1, |&a, &b| logits[b].total_cmp(&logits[a]));
        order.truncate(opts.top_k);
        order.sort_unstable();
    }
    let max = argmax().1;
    let weights: Vec<f64> = order
        .iter()
        .map(|&i| (f64::from(logits[i] - max) / f64::from(opts.temperature)).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut u = stream.random::<f64>() * total;
    for (&i, w) in order.iter().zip(&weights) {
        if u < *w {
            return i as u32;
        }
        u -= w;
    }
    order.last().map_or(0, |&i| i as u32)
}

/// Continues `prompt` (EOT if empty) by up to `opts.max_tokens` tokens, returning the new
/// tokens. The context is the last maxT tokens; `on_token` sees each token as it is chosen.
pub fn generate<B: Backend>(
    backend: &B,
    model: &Gpt2<B>,
    prompt: &[u32],
    opts: &SampleOptions,
    on_token: &mut dyn FnMut(u32),
) -> Result<Vec<u32>> {
    let config = *model.config();
    if !(opts.temperature >= 0.0 && opts.temperature.is_finite()) {
        return Err(Error::invalid(format!(
            "--temperature must be a finite number >= 0, got {}",
            opts.temperature
        )));
    }
    if let Some(&bad) = prompt.iter().find(|&&tok| tok as usize >= config.vocab_size) {
        return Err(Error::invalid(format!(
            "prompt token {bad} is not below the model's vocabulary size {}",
            config.vocab_size
        )));
    }
    if prompt.is_empty() && EOT as usize >= config.vocab_size {
        return Err(Error::invalid(format!(
            "an empty prompt starts from <|endoftext|> ({EOT}), which is outside this model's vocabulary of {}; pass a prompt",
            config.vocab_size
        )));
    }
    let mut tokens = if prompt.is_empty() { vec![EOT] } else { prompt.to_vec() };
    let capacity = tokens.len().saturating_add(opts.max_tokens).min(config.max_seq_len);
    let mut acts = Activations::new(backend, &config, model.options().attention, 1, capacity)?;
    let mut stream = rng::stream(opts.seed, &[rng::family::SAMPLE]);
    let (v, ld) = (config.vocab_size, acts.logits_ld);
    let mut row = vec![B::Act::default(); v];
    let mut logits = vec![0.0f32; v];
    let mut generated = Vec::with_capacity(opts.max_tokens.min(1 << 16));
    for _ in 0..opts.max_tokens {
        let context = &tokens[tokens.len().saturating_sub(capacity)..];
        let t = context.len();
        let inputs = backend.upload_tokens(context, TokenShape { b: 1, t, vocab: v })?;
        model.forward(backend, &mut acts, &inputs, 1, t)?;
        backend.download(acts.logits.window(0, (t - 1) * ld, v), &mut row)?;
        for (logit, x) in logits.iter_mut().zip(&row) {
            *logit = x.to_f32();
        }
        if let Some(bad) = logits.iter().position(|x| !x.is_finite()) {
            return Err(Error::invalid(format!(
                "the model's logit for token {bad} is {} after {} tokens: the checkpoint's \
                 parameters are not finite (or overflow this precision)",
                logits[bad],
                tokens.len()
            )));
        }
        let next = pick(&logits, opts, &mut stream);
        on_token(next);
        tokens.push(next);
        generated.push(next);
    }
    Ok(generated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(temperature: f32, top_k: usize) -> SampleOptions {
        SampleOptions { max_tokens: 1, temperature, top_k, seed: 0 }
    }

    #[test]
    fn greedy_top_k_and_temperature() {
        let logits = [0.0, 3.0, 1.0, 2.9];
        let mut stream = rng::stream(1, &[]);
        assert_eq!(pick(&logits, &opts(0.0, 0), &mut stream), 1);
        for _ in 0..200 {
            let tok = pick(&logits, &opts(1.0, 2), &mut stream);
            assert!(tok == 1 || tok == 3, "top-2 allows only tokens 1 and 3, got {tok}");
        }
        let low_t: Vec<u32> =
            (0..200).map(|_| pick(&logits, &opts(0.01, 0), &mut stream)).collect();
        assert!(low_t.iter().all(|&t| t == 1), "a tiny temperature is greedy");
        let mut counts = [0; 4];
        for _ in 0..4000 {
            counts[pick(&logits, &opts(1.0, 0), &mut stream) as usize] += 1;
        }
        // softmax([0, 3, 1, 2.9]) ≈ [0.023, 0.49, 0.066, 0.42]
        assert!(counts[1] > 1800 && counts[3] > 1500 && counts[0] < 200, "{counts:?}");
    }
}
