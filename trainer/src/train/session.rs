//! One model with everything training needs (gradients, AdamW moments, activations), and the
//! training step and evaluation built from the model's passes.

use crate::backend::ops::{GradWrite, WorkingRounding};
use crate::backend::{Backend, Buf, TokenShape, View, ViewMut};
use crate::data::DataLoader;
use crate::error::{Error, Result};
use crate::loss_scale::{LossScaleConfig, LossScaler, StepDecision};
use crate::model::{Activations, Gpt2, GradScratch, Params};
use crate::optim::{AdamW, AdamWConfig, UpdateStep};

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
    /// Global L2 norm of the (unscaled) gradient, before clipping; NaN or inf for a step the
    /// loss scaler skipped.
    pub grad_norm: f32,
    /// Whether the fp16 loss scaler skipped the update (a gradient overflowed).
    pub skipped: bool,
    /// The loss scale this step used (fp16 only).
    pub loss_scale: Option<f32>,
}

/// The shape of training: micro-batches of `b × t`, `grad_accum_steps` per optimizer step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchShape {
    /// Micro-batch size B.
    pub b: usize,
    /// Sequence length T.
    pub t: usize,
    /// Micro-batches per optimizer step.
    pub grad_accum_steps: usize,
}

/// A model in training on one backend.
pub struct Session<'b, B: Backend> {
    backend: &'b B,
    model: Gpt2<B>,
    grads: Buf<B, f32>,
    adamw: AdamW<B>,
    acts: Activations<B>,
    scratch: GradScratch<B>,
    losses: Buf<B, f32>,
    host_inputs: Vec<u32>,
    host_targets: Vec<u32>,
    inputs: Option<B::Tokens>,
    targets: Option<B::Tokens>,
    shape: BatchShape,
    scaler: Option<LossScaler>,
}

impl<'b, B: Backend> Session<'b, B> {
    /// Allocates training state for `model`. fp16 training gets the dynamic loss scaler.
    pub fn new(
        backend: &'b B,
        model: Gpt2<B>,
        optim: AdamWConfig,
        shape: BatchShape,
    ) -> Result<Self> {
        let config = *model.config();
        let BatchShape { b, t, grad_accum_steps } = shape;
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
        let options = model.options();
        let n = model.layout().len();
        let fp16 = backend.precision() == crate::backend::Precision::Fp16;
        Ok(Self {
            backend,
            grads: backend.alloc(n, "the gradients")?,
            adamw: AdamW::new(backend, model.layout(), optim)?,
            acts: Activations::new(backend, &config, options.attention, b, t)?,
            scratch: GradScratch::new(backend, &config, options.fuse, b, t)?,
            losses: backend.alloc(grad_accum_steps * b * t, "the losses")?,
            host_inputs: vec![0; b * t],
            host_targets: vec![0; b * t],
            inputs: None,
            targets: None,
            model,
            shape,
            scaler: fp16.then(|| LossScaler::new(LossScaleConfig::default())),
        })
    }

    /// The model.
    pub fn model(&self) -> &Gpt2<B> {
        &self.model
    }

    /// The dynamic loss scaler (fp16 only).
    pub fn scaler(&self) -> Option<&LossScaler> {
        self.scaler.as_ref()
    }

    /// Replaces the loss scaler's state (when resuming an fp16 run).
    pub fn set_scaler(&mut self, scaler: LossScaler) {
        if self.scaler.is_some() {
            self.scaler = Some(scaler);
        }
    }

    /// Replaces the AdamW moments (when resuming).
    pub fn set_moments(&mut self, m: &Params<Vec<f32>>, v: &Params<Vec<f32>>) -> Result<()> {
        let layout = self.model.layout();
        layout.upload(self.backend, m, &mut self.adamw.m)?;
        layout.upload(self.backend, v, &mut self.adamw.v)
    }

    /// The f32 master parameters, copied to the host.
    pub fn params(&self) -> Result<Params<Vec<f32>>> {
        self.model.params_to_host(self.backend)
    }

    /// The AdamW moments (m, v), copied to the host.
    pub fn moments(&self) -> Result<[Params<Vec<f32>>; 2]> {
        let layout = self.model.layout();
        Ok([
            layout.download(self.backend, &self.adamw.m)?,
            layout.download(self.backend, &self.adamw.v)?,
        ])
    }

    /// The gradients of the last step, copied to the host (for tests and debugging).
    pub fn grads(&self) -> Result<Params<Vec<f32>>> {
        self.model.layout().download(self.backend, &self.grads)
    }

    /// Overwrites the gradient arena (for tests: the next [`Session::forward_backward`] must
    /// give the same gradients whatever it holds, NaN included).
    pub fn set_grads(&mut self, grads: &Params<Vec<f32>>) -> Result<()> {
        self.model.layout().upload(self.backend, grads, &mut self.grads)
    }

    /// Forward (and with `dloss` the backward) of the next batch; the positions' losses go
    /// to micro-batch `micro`'s window of the losses buffer.
    ///
    /// The targets are uploaded after the forward is queued, which does not read them: on a
    /// GPU their validation and copy then overlap the forward.
    fn micro_step(
        &mut self,
        data: &mut dyn BatchSource,
        micro: usize,
        dloss: Option<f32>,
    ) -> Result<()> {
        data.next_batch(&mut self.host_inputs, &mut self.host_targets)?;
        let (b, t) = (self.shape.b, self.shape.t);
        let bt = b * t;
        let backend = self.backend;
        let shape = TokenShape { b, t, vocab: self.model.config().vocab_size };
        let inputs = load_tokens(backend, &mut self.inputs, &self.host_inputs, shape)?;
        self.model.forward(backend, &mut self.acts, inputs, b, t)?;
        let targets = load_tokens(backend, &mut self.targets, &self.host_targets, shape)?;
        let losses = ViewMut::of(&mut self.losses, micro * bt..(micro + 1) * bt);
        self.model.classify(backend, &mut self.acts, targets, losses, (b, t), dloss)?;
        if dloss.is_some() {
            // The first micro-batch writes the gradients over the previous step's.
            let grads = (&mut self.grads, GradWrite::for_micro_batch(micro));
            self.model.backward(backend, &self.acts, inputs, grads, &mut self.scratch, (b, t))?;
        }
        Ok(())
    }

    /// The mean of the first `micro_batches` windows of the losses buffer (one read-back).
    fn mean_loss(&self, micro_batches: usize) -> Result<f32> {
        let n = micro_batches * self.shape.b * self.shape.t;
        let mut host = vec![0.0f32; n];
        self.backend.download(View::prefix(&self.losses, n), &mut host)?;
        Ok((host.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64) as f32)
    }

    /// The gradients of one optimizer step's micro-batches (replacing the previous ones, see
    /// [`Session::grads`]: the first micro-batch's backward overwrites them, so the arena is
    /// never zeroed), multiplied by the loss scale under fp16; returns the mean loss.
    pub fn forward_backward(&mut self, data: &mut dyn BatchSource) -> Result<f32> {
        let accum = self.shape.grad_accum_steps;
        let scale = self.scaler.as_ref().map_or(1.0, LossScaler::scale);
        let dloss = scale / (self.shape.b * self.shape.t * accum) as f32;
        for micro in 0..accum {
            self.micro_step(data, micro, Some(dloss))?;
        }
        self.mean_loss(accum)
    }

    /// One optimizer step: gradients accumulated over the micro-batches, global norm, clipping,
    /// AdamW update number `t` (1-based) at learning rate `lr`. A non-finite loss or gradient
    /// norm stops before the update, leaving the parameters untouched — except under fp16 loss
    /// scaling, where an overflowing gradient skips the update and lowers the scale.
    pub fn train_step(
        &mut self,
        data: &mut dyn BatchSource,
        lr: f32,
        t: u32,
    ) -> Result<StepOutput> {
        let backend = self.backend;
        let loss_scale = self.scaler.as_ref().map(LossScaler::scale);
        let loss = self.forward_backward(data)?;
        let norm = backend.grad_norm(View::all(&self.grads))?;
        let unscale = self.scaler.as_ref().map_or(1.0, LossScaler::unscale_factor);
        let grad_norm = norm.norm * unscale;
        let skipped = match &mut self.scaler {
            Some(scaler) => scaler.update(norm.nonfinite) == StepDecision::Skip,
            None => false,
        };
        let output = StepOutput { loss, grad_norm, skipped, loss_scale };
        if skipped && loss.is_finite() {
            return Ok(output);
        }
        if !loss.is_finite() || norm.nonfinite || !grad_norm.is_finite() {
            return Err(Error::Diverged(format!(
                "the loss is {loss} and the gradient norm {grad_norm}"
            )));
        }
        // The working copy is rounded to nearest from the f32 master weights (as autocast
        // does): a function of the master weights alone, so resuming from them is bit-exact.
        let rounding = WorkingRounding::NearestEven;
        let grad_scale = self.adamw_clip(grad_norm) * unscale;
        let step = UpdateStep { lr, t, grad_scale, rounding };
        self.adamw.update(backend, &mut self.model, &self.grads, step)?;
        Ok(output)
    }

    fn adamw_clip(&self, grad_norm: f32) -> f32 {
        self.adamw.config().clip_scale(grad_norm)
    }

    /// Mean loss over the next `batches` batches of `data` (no parameter change).
    pub fn evaluate(&mut self, data: &mut dyn BatchSource, batches: usize) -> Result<f32> {
        let mut sum = 0.0f64;
        for _ in 0..batches {
            self.micro_step(data, 0, None)?;
            sum += f64::from(self.mean_loss(1)?);
        }
        Ok((sum / batches.max(1) as f64) as f32)
    }
}

/// `ids` in the token buffer `slot`: replacing its batch, or uploaded into a new buffer on the
/// first call.
fn load_tokens<'t, B: Backend>(
    backend: &B,
    slot: &'t mut Option<B::Tokens>,
    ids: &[u32],
    shape: TokenShape,
) -> Result<&'t mut B::Tokens> {
    match slot {
        Some(tokens) => {
            backend.replace_tokens(tokens, ids)?;
            Ok(tokens)
        }
        None => Ok(slot.insert(backend.upload_tokens(ids, shape)?)),
    }
}
