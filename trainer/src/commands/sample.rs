//! `trainer sample`.

use super::{model_options, resolve_device};
use crate::cli::SampleArgs;
use anyhow::Result;
use trainer::backend::{Backend, BackendJob};
use trainer::checkpoint::{read_model, resolve_model_file};
use trainer::data::Tokenizer;
use trainer::model::{Gpt2, ModelOptions};
use trainer::sample::{SampleOptions, generate};

/// `trainer sample` on whichever backend was chosen.
struct SampleJob<'a> {
    ckpt: &'a trainer::checkpoint::ModelCheckpoint,
    options: ModelOptions,
    prompt: &'a [u32],
    opts: &'a SampleOptions,
}

impl BackendJob for SampleJob<'_> {
    type Output = Vec<u32>;
    fn run<B: Backend>(self, backend: &B) -> trainer::Result<Vec<u32>> {
        let model = Gpt2::new(backend, self.ckpt.config, &self.ckpt.params, self.options)?;
        generate(backend, &model, self.prompt, self.opts, &mut |_| ())
    }
}

pub fn sample(args: SampleArgs) -> Result<()> {
    let (device, compute) = resolve_device(&args.kernels)?;
    let path = resolve_model_file(&args.checkpoint)?;
    let ckpt = read_model(&path)?;
    let tokenizer = Tokenizer::new();
    let prompt = tokenizer.encode(&args.prompt);
    let opts = SampleOptions {
        max_tokens: args.max_tokens,
        temperature: args.temperature,
        top_k: args.top_k,
        seed: args.seed,
    };
    let options = model_options(&args.kernels, &ckpt.config, compute.precision);
    let job = SampleJob { ckpt: &ckpt, options, prompt: &prompt, opts: &opts };
    let generated = device.run(compute, job)?;
    println!("{}{}", args.prompt, tokenizer.decode(&generated));
    Ok(())
}
