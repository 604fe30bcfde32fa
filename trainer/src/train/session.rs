//! One model with everything training needs (gradients, AdamW moments, activations), and the
//! training step and evaluation built from the model's passes.

use crate::backend::{Backend, View, ViewMut};
use crate::data::DataLoader;
use crate::error::{Error, Result};
use crate::model::{
    Activations, Gpt2, GradScratch, Params, alloc_params, download_params, upload_params,
};
use crate::optim::{AdamW, AdamWConfig};

/// Something that yields batches of token ids.
pub trait BatchSource {
    /// Fills `inputs` and `targets` (B·T each).
    fn next_batch(&mut self, inputs: &mut [u32], targets: &mut [u32]) -> Result<()>;
}

impl BatchSource for DataLoader {
    fn next_batch(&mut self, inputs: &mut [u32], targets: &mut [u32]) -> Result<()> {
        DataLoader::next_batch(self, inputs, targets)
    }
}

/// The result of one optimizer step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepOutput {
    /// Mean training loss over the step's B·T·accumulation tokens.
    pub loss: f32,
    /// Global L2 norm of the gradient, before clipping.
    pub grad_norm: f32,
}

/// A model in training on one backend.
pub struct Session<'b, B: Backend> {
    backend: &'b B,
    model: Gpt2<B>,
    grads: Params<B::Buffer>,
    adamw: AdamW<B>,
    acts: Activations<B>,
    scratch: GradScratch<B>,
    inputs: Vec<u32>,
    targets: Vec<u32>,
    b: usize,
    t: usize,
    grad_accum_steps: usize,
    optim: AdamWConfig,
}

impl<'b, B: Backend> Session<'b, B> {
    /// Allocates training state for `model` with micro-batches of `b × t` tokens and
    /// `grad_accum_steps` micro-batches per optimizer step.
    pub fn new(
        backend: &'b B,
        model: Gpt2<B>,
        optim: AdamWConfig,
        b: usize,
        t: usize,
        grad_accum_steps: usize,
    ) -> Result<Self> {
        let config = *model.config();
        if t > config.max_seq_len {
            return Err(Error::invalid(format!(
                "sequence length T={t} exceeds the model's maximum sequence length maxT={}",
                config.max_seq_len
            )));
        }
        if b == 0 || t == 0 || grad_accum_steps == 0 {
            return Err(Error::invalid(
                "batch size, sequence length and accumulation must be positive",
            ));
        }
        Ok(Self {
            backend,
            grads: alloc_params(backend, &config)?,
            adamw: AdamW::new(backend, &config)?,
            acts: Activations::new(backend, &config, b, t)?,
            scratch: GradScratch::new(backend, &config, b, t)?,
            inputs: vec![0; b * t],
            targets: vec![0; b * t],
            model,
            b,
            t,
            grad_accum_steps,
            optim,
        })
    }

    /// The model.
    pub fn model(&self) -> &Gpt2<B> {
        &self.model
    }

    /// Replaces the AdamW moments (when resuming).
    pub fn set_moments(&mut self, m: &Params<Vec<f32>>, v: &Params<Vec<f32>>) -> Result<()> {
        let config = *self.model.config();
        self.adamw.m = upload_params(self.backend, &config, m)?;
        self.adamw.v = upload_params(self.backend, &config, v)?;
        Ok(())
    }

    /// The parameters, copied to the host.
    pub fn params(&self) -> Result<Params<Vec<f32>>> {
        download_params(self.backend, self.model.params())
    }

    /// The AdamW moments (m, v), copied to the host.
    pub fn moments(&self) -> Result<[Params<Vec<f32>>; 2]> {
        Ok([
            download_params(self.backend, &self.adamw.m)?,
            download_params(self.backend, &self.adamw.v)?,
        ])
    }

    /// Loads the next batch into the activations' token buffers.
    fn load_batch(&mut self, data: &mut dyn BatchSource) -> Result<()> {
        data.next_batch(&mut self.inputs, &mut self.targets)?;
        let bt = self.b * self.t;
        self.backend.upload_tokens(&self.inputs, ViewMut::prefix(&mut self.acts.inputs, bt))?;
        self.backend.upload_tokens(&self.targets, ViewMut::prefix(&mut self.acts.targets, bt))
    }

    /// One optimizer step: gradients accumulated over the micro-batches, global norm, clipping,
    /// AdamW update number `t` (1-based) at learning rate `lr`. A non-finite loss or gradient
    /// norm stops before the update, leaving the parameters untouched.
    pub fn train_step(
        &mut self,
        data: &mut dyn BatchSource,
        lr: f32,
        t: u32,
    ) -> Result<StepOutput> {
        let backend = self.backend;
        for (_, grad) in self.grads.iter_mut() {
            backend.zero(ViewMut::all(grad))?;
        }
        let dloss = 1.0 / (self.b * self.t * self.grad_accum_steps) as f32;
        let mut loss_sum = 0.0f64;
        for _ in 0..self.grad_accum_steps {
            self.load_batch(data)?;
            self.model.forward(backend, &mut self.acts, self.b, self.t)?;
            loss_sum +=
                f64::from(self.model.classify(backend, &mut self.acts, self.b, self.t, dloss)?);
            self.model.backward(
                backend,
                &self.acts,
                &mut self.grads,
                &mut self.scratch,
                self.b,
                self.t,
            )?;
        }
        let loss = (loss_sum / self.grad_accum_steps as f64) as f32;
        let views: Vec<View<'_, B::Buffer>> = self.grads.0.iter().map(View::all).collect();
        let grad_norm = backend.global_norm(&views)?;
        if !loss.is_finite() || !grad_norm.is_finite() {
            return Err(Error::Diverged(format!(
                "the loss is {loss} and the gradient norm {grad_norm}"
            )));
        }
        let scale = self.optim.clip_scale(grad_norm);
        let params = self.model.params_mut();
        self.adamw.update(backend, &self.optim, params, &self.grads, lr, t, scale)?;
        Ok(StepOutput { loss, grad_norm })
    }

    /// Mean loss over the next `batches` batches of `data` (no parameter change).
    pub fn evaluate(&mut self, data: &mut dyn BatchSource, batches: usize) -> Result<f32> {
        let mut sum = 0.0f64;
        for _ in 0..batches {
            self.load_batch(data)?;
            self.model.forward(self.backend, &mut self.acts, self.b, self.t)?;
            sum += f64::from(self.model.classify(
                self.backend,
                &mut self.acts,
                self.b,
                self.t,
                0.0,
            )?);
        }
        Ok((sum / batches.max(1) as f64) as f32)
    }
}
