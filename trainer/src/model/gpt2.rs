//! The GPT-2 forward and backward passes, written once over [`Backend`].

use super::{Activations, Gpt2Config, GradScratch, ParamKind, Params};
use crate::backend::{Backend, Storage, View, ViewMut};
use crate::error::{Error, Result};

/// A GPT-2 model: its dimensions and its parameters in backend memory.
pub struct Gpt2<B: Backend> {
    config: Gpt2Config,
    params: Params<B::Buffer>,
}

/// Allocates one backend buffer per parameter tensor, all zero.
pub fn alloc_params<B: Backend>(backend: &B, config: &Gpt2Config) -> Result<Params<B::Buffer>> {
    Params::try_from_fn(|kind| backend.alloc(kind.len(config)))
}

/// Copies host tensors (checkpoint order) into freshly allocated backend buffers.
pub fn upload_params<B: Backend>(
    backend: &B,
    config: &Gpt2Config,
    host: &Params<Vec<f32>>,
) -> Result<Params<B::Buffer>> {
    let mut params = alloc_params(backend, config)?;
    for (kind, buf) in params.iter_mut() {
        let src = &host[kind];
        if src.len() != kind.len(config) {
            return Err(Error::invalid(format!(
                "parameter {} holds {} values; the model needs {}",
                kind.name(),
                src.len(),
                kind.len(config)
            )));
        }
        backend.upload(src, ViewMut::all(buf))?;
    }
    Ok(params)
}

/// Copies backend tensors to the host.
pub fn download_params<B: Backend>(
    backend: &B,
    params: &Params<B::Buffer>,
) -> Result<Params<Vec<f32>>> {
    Params::try_from_fn(|kind| {
        let view = View::all(&params[kind]);
        let mut host = vec![0.0; view.len()];
        backend.download(view, &mut host)?;
        Ok(host)
    })
}

/// Layer `l`'s slice of the gradient (or other per-parameter) buffer of `kind`.
fn layer_mut<'a, S: Storage>(
    buf: &'a mut S,
    kind: ParamKind,
    config: &Gpt2Config,
    l: usize,
) -> ViewMut<'a, S> {
    ViewMut::of(buf, kind.layer(config, l))
}

impl<B: Backend> Gpt2<B> {
    /// A model with the given host parameters.
    pub fn new(backend: &B, config: Gpt2Config, host: &Params<Vec<f32>>) -> Result<Self> {
        config.validate()?;
        Ok(Self { params: upload_params(backend, &config, host)?, config })
    }

    /// The model's dimensions.
    pub fn config(&self) -> &Gpt2Config {
        &self.config
    }

    /// The parameters.
    pub fn params(&self) -> &Params<B::Buffer> {
        &self.params
    }

    /// The parameters, writable (for the optimizer).
    pub fn params_mut(&mut self) -> &mut Params<B::Buffer> {
        &mut self.params
    }

    /// Layer `l`'s slice of parameter `kind`.
    fn p(&self, kind: ParamKind, l: usize) -> View<'_, B::Buffer> {
        View::of(&self.params[kind], kind.layer(&self.config, l))
    }

    /// Forward pass of `b × t` tokens (already in `acts.inputs`): fills `acts` up to the
    /// logits.
    pub fn forward(
        &self,
        backend: &B,
        acts: &mut Activations<B>,
        b: usize,
        t: usize,
    ) -> Result<()> {
        let cfg = &self.config;
        assert!(b <= acts.max_b && t <= acts.max_t, "batch larger than the activations");
        let (c, nh, bt, l_last) = (cfg.channels, cfg.num_heads, b * t, cfg.num_layers - 1);
        let (n, natt) = (bt * c, b * nh * t * t);
        let a = acts;
        backend.encoder_forward(
            a.encoded.at_mut(0, n),
            View::prefix(&a.inputs, bt),
            self.p(ParamKind::Wte, 0),
            self.p(ParamKind::Wpe, 0),
            b,
            t,
            c,
        )?;
        for l in 0..cfg.num_layers {
            let residual = if l == 0 { a.encoded.at(0, n) } else { a.residual3.at(l - 1, n) };
            backend.layernorm_forward(
                a.ln1.at_mut(l, n),
                a.ln1_mean.at_mut(l, bt),
                a.ln1_rstd.at_mut(l, bt),
                residual.clone(),
                self.p(ParamKind::Ln1w, l),
                self.p(ParamKind::Ln1b, l),
                bt,
                c,
            )?;
            backend.matmul_forward(
                a.qkv.at_mut(l, 3 * n),
                a.ln1.at(l, n),
                self.p(ParamKind::Qkvw, l),
                Some(self.p(ParamKind::Qkvb, l)),
                bt,
                c,
                3 * c,
            )?;
            backend.attention_forward(
                a.atty.at_mut(l, n),
                a.att.at_mut(l, natt),
                a.qkv.at(l, 3 * n),
                b,
                t,
                c,
                nh,
            )?;
            backend.matmul_forward(
                a.attproj.at_mut(l, n),
                a.atty.at(l, n),
                self.p(ParamKind::Attprojw, l),
                Some(self.p(ParamKind::Attprojb, l)),
                bt,
                c,
                c,
            )?;
            backend.residual_forward(a.residual2.at_mut(l, n), residual, a.attproj.at(l, n))?;
            backend.layernorm_forward(
                a.ln2.at_mut(l, n),
                a.ln2_mean.at_mut(l, bt),
                a.ln2_rstd.at_mut(l, bt),
                a.residual2.at(l, n),
                self.p(ParamKind::Ln2w, l),
                self.p(ParamKind::Ln2b, l),
                bt,
                c,
            )?;
            backend.matmul_forward(
                a.fch.at_mut(l, 4 * n),
                a.ln2.at(l, n),
                self.p(ParamKind::Fcw, l),
                Some(self.p(ParamKind::Fcb, l)),
                bt,
                c,
                4 * c,
            )?;
            backend.gelu_forward(a.fch_gelu.at_mut(l, 4 * n), a.fch.at(l, 4 * n))?;
            backend.matmul_forward(
                a.fcproj.at_mut(l, n),
                a.fch_gelu.at(l, 4 * n),
                self.p(ParamKind::Fcprojw, l),
                Some(self.p(ParamKind::Fcprojb, l)),
                bt,
                4 * c,
                c,
            )?;
            backend.residual_forward(
                a.residual3.at_mut(l, n),
                a.residual2.at(l, n),
                a.fcproj.at(l, n),
            )?;
        }
        backend.layernorm_forward(
            a.lnf.at_mut(0, n),
            a.lnf_mean.at_mut(0, bt),
            a.lnf_rstd.at_mut(0, bt),
            a.residual3.at(l_last, n),
            self.p(ParamKind::Lnfw, 0),
            self.p(ParamKind::Lnfb, 0),
            bt,
            c,
        )?;
        backend.matmul_forward(
            a.logits.at_mut(0, bt * cfg.padded_vocab_size),
            a.lnf.at(0, n),
            self.p(ParamKind::Wte, 0),
            None,
            bt,
            c,
            cfg.padded_vocab_size,
        )
    }

    /// After [`Gpt2::forward`]: the cross-entropy losses against `acts.targets`, with the
    /// logits replaced by their gradient scaled by `dloss` (see [`cpu_ref::fused_classifier`]).
    /// Returns the mean loss over the `b × t` positions (read back to the host).
    pub fn classify(
        &self,
        backend: &B,
        acts: &mut Activations<B>,
        b: usize,
        t: usize,
        dloss: f32,
    ) -> Result<f32> {
        let (bt, v, vp) = (b * t, self.config.vocab_size, self.config.padded_vocab_size);
        backend.fused_classifier(
            acts.logits.at_mut(0, bt * vp),
            acts.losses.at_mut(0, bt),
            View::prefix(&acts.targets, bt),
            dloss,
            bt,
            v,
            vp,
        )?;
        let mut losses = vec![0.0; bt];
        backend.download(acts.losses.at(0, bt), &mut losses)?;
        Ok((losses.iter().map(|&x| f64::from(x)).sum::<f64>() / bt as f64) as f32)
    }

    /// Backward pass after [`Gpt2::forward`] and [`Gpt2::classify`]: accumulates the
    /// parameter gradients into `grads`.
    pub fn backward(
        &self,
        backend: &B,
        acts: &Activations<B>,
        grads: &mut Params<B::Buffer>,
        scratch: &mut GradScratch<B>,
        b: usize,
        t: usize,
    ) -> Result<()> {
        let cfg = &self.config;
        let (c, nh, bt, vp) = (cfg.channels, cfg.num_heads, b * t, cfg.padded_vocab_size);
        let (n, natt) = (bt * c, b * nh * t * t);
        let (a, s) = (acts, scratch);
        let [
            g_wte,
            g_wpe,
            g_ln1w,
            g_ln1b,
            g_qkvw,
            g_qkvb,
            g_attprojw,
            g_attprojb,
            g_ln2w,
            g_ln2b,
            g_fcw,
            g_fcb,
            g_fcprojw,
            g_fcprojb,
            g_lnfw,
            g_lnfb,
        ] = &mut grads.0;

        backend.matmul_backward(
            s.dln.at_mut(0, n),
            ViewMut::all(g_wte),
            None,
            a.logits.at(0, bt * vp),
            a.lnf.at(0, n),
            self.p(ParamKind::Wte, 0),
            bt,
            c,
            vp,
        )?;
        backend.zero(s.dres.at_mut(0, n))?;
        backend.layernorm_backward(
            s.dres.at_mut(0, n),
            ViewMut::all(g_lnfw),
            ViewMut::all(g_lnfb),
            s.dln.at(0, n),
            a.residual3.at(cfg.num_layers - 1, n),
            self.p(ParamKind::Lnfw, 0),
            a.lnf_mean.at(0, bt),
            a.lnf_rstd.at(0, bt),
            bt,
            c,
        )?;
        // From here on `dres` is the gradient of the residual stream: first of layer l's
        // output (residual3), then, once the MLP's layernorm adds its part, of residual2, and
        // once the attention's layernorm adds its part, of layer l's input.
        for l in (0..cfg.num_layers).rev() {
            let residual = if l == 0 { a.encoded.at(0, n) } else { a.residual3.at(l - 1, n) };
            backend.matmul_backward(
                s.dfch_gelu.at_mut(0, 4 * n),
                layer_mut(g_fcprojw, ParamKind::Fcprojw, cfg, l),
                Some(layer_mut(g_fcprojb, ParamKind::Fcprojb, cfg, l)),
                s.dres.at(0, n),
                a.fch_gelu.at(l, 4 * n),
                self.p(ParamKind::Fcprojw, l),
                bt,
                4 * c,
                c,
            )?;
            backend.gelu_backward(
                s.dfch.at_mut(0, 4 * n),
                a.fch.at(l, 4 * n),
                s.dfch_gelu.at(0, 4 * n),
            )?;
            backend.matmul_backward(
                s.dln.at_mut(0, n),
                layer_mut(g_fcw, ParamKind::Fcw, cfg, l),
                Some(layer_mut(g_fcb, ParamKind::Fcb, cfg, l)),
                s.dfch.at(0, 4 * n),
                a.ln2.at(l, n),
                self.p(ParamKind::Fcw, l),
                bt,
                c,
                4 * c,
            )?;
            backend.layernorm_backward(
                s.dres.at_mut(0, n),
                layer_mut(g_ln2w, ParamKind::Ln2w, cfg, l),
                layer_mut(g_ln2b, ParamKind::Ln2b, cfg, l),
                s.dln.at(0, n),
                a.residual2.at(l, n),
                self.p(ParamKind::Ln2w, l),
                a.ln2_mean.at(l, bt),
                a.ln2_rstd.at(l, bt),
                bt,
                c,
            )?;
            backend.matmul_backward(
                s.datty.at_mut(0, n),
                layer_mut(g_attprojw, ParamKind::Attprojw, cfg, l),
                Some(layer_mut(g_attprojb, ParamKind::Attprojb, cfg, l)),
                s.dres.at(0, n),
                a.atty.at(l, n),
                self.p(ParamKind::Attprojw, l),
                bt,
                c,
                c,
            )?;
            backend.attention_backward(
                s.dqkv.at_mut(0, 3 * n),
                s.datty.at(0, n),
                a.qkv.at(l, 3 * n),
                a.att.at(l, natt),
                b,
                t,
                c,
                nh,
            )?;
            backend.matmul_backward(
                s.dln.at_mut(0, n),
                layer_mut(g_qkvw, ParamKind::Qkvw, cfg, l),
                Some(layer_mut(g_qkvb, ParamKind::Qkvb, cfg, l)),
                s.dqkv.at(0, 3 * n),
                a.ln1.at(l, n),
                self.p(ParamKind::Qkvw, l),
                bt,
                c,
                3 * c,
            )?;
            backend.layernorm_backward(
                s.dres.at_mut(0, n),
                layer_mut(g_ln1w, ParamKind::Ln1w, cfg, l),
                layer_mut(g_ln1b, ParamKind::Ln1b, cfg, l),
                s.dln.at(0, n),
                residual,
                self.p(ParamKind::Ln1w, l),
                a.ln1_mean.at(l, bt),
                a.ln1_rstd.at(l, bt),
                bt,
                c,
            )?;
        }
        backend.encoder_backward(
            ViewMut::all(g_wte),
            ViewMut::all(g_wpe),
            s.dres.at(0, n),
            View::prefix(&a.inputs, bt),
            b,
            t,
            c,
        )
    }
}
