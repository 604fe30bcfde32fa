//! The GPT-2 forward and backward passes, written once over [`Backend`].

use super::{Activations, Gpt2Config, GradScratch, ParamKind, ParamLayout, Params};
use crate::backend::ops::{
    Activation, AttentionBackward, AttentionForward, AttentionKind, AttentionSavedView, Classifier,
    Dims, GradWindow, GradWrite, LayerNormBackward, LayerNormForward, LayerNormStats, Linear,
    MatmulBackward, MatmulForward, ParamGrads, ResidualLayerNormForward,
};
use crate::backend::{
    ActBuf, ActElement, ActMut, ActView, Backend, Buf, F32Mut, Precision, View, ViewMut,
};
use crate::error::{Error, Result};

/// How the model runs its ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelOptions {
    /// Naive (materialised) or flash attention.
    pub attention: AttentionKind,
    /// Fuse GELU into the matmuls and the residual adds into the layernorms (`--no-fuse`
    /// turns this off: the unfused rung of the speed ladder).
    pub fuse: bool,
}

impl ModelOptions {
    /// `attention`, or when `None` the fastest kind for `precision` at `config`'s head size,
    /// with `fuse`.
    pub fn resolve(
        attention: Option<AttentionKind>,
        fuse: bool,
        precision: Precision,
        config: &Gpt2Config,
    ) -> Self {
        let attention =
            attention.unwrap_or_else(|| AttentionKind::fastest(precision, config.head_size()));
        Self { attention, fuse }
    }
}

/// Flash attention's kernels run 16-bit activations in heads of
/// [`flash_head_size`](crate::backend::ops::flash_head_size) channels: anything else is an
/// error naming the option, before the model is built.
fn check_flash(precision: Precision, config: &Gpt2Config) -> Result<()> {
    if !matches!(precision, Precision::Bf16 | Precision::Fp16) {
        return Err(Error::invalid(crate::backend::ops::FLASH_NEEDS_16_BIT));
    }
    let hd = crate::backend::ops::flash_head_size();
    if config.head_size() != hd {
        return Err(Error::invalid(format!(
            "flash attention runs heads of {hd} channels; this model's are {} (--n-embd {} / \
             --n-head {}): use --attention naive",
            config.head_size(),
            config.channels,
            config.num_heads
        )));
    }
    Ok(())
}

impl Default for ModelOptions {
    fn default() -> Self {
        Self { attention: AttentionKind::Naive, fuse: true }
    }
}

/// A GPT-2 model: its dimensions and its parameters in backend memory (the f32 master
/// weights, one arena in checkpoint order, and a working copy in the activation type when
/// that is not f32).
pub struct Gpt2<B: Backend> {
    config: Gpt2Config,
    options: ModelOptions,
    layout: ParamLayout,
    master: Buf<B, f32>,
    working: Option<ActBuf<B>>,
}

impl<B: Backend> Gpt2<B> {
    /// A model with the given host parameters.
    pub fn new(
        backend: &B,
        config: Gpt2Config,
        host: &Params<Vec<f32>>,
        options: ModelOptions,
    ) -> Result<Self> {
        config.validate()?;
        if options.attention == AttentionKind::Flash {
            check_flash(backend.precision(), &config)?;
        }
        let layout = ParamLayout::new(&config);
        for (kind, tensor) in host.iter() {
            if tensor.len() != kind.len(&config) {
                return Err(Error::invalid(format!(
                    "parameter {} holds {} values; the model needs {}",
                    kind.name(),
                    tensor.len(),
                    kind.len(&config)
                )));
            }
        }
        let mut master = backend.alloc::<f32>(layout.len(), "the parameters")?;
        layout.upload(backend, host, &mut master)?;
        let working = if B::Act::WORKING_COPY {
            let what = "the working copy of the parameters";
            let mut working = backend.alloc::<B::Act>(layout.len(), what)?;
            backend.round_to_act(View::all(&master), ViewMut::all(&mut working))?;
            Some(working)
        } else {
            None
        };
        Ok(Self { config, options, layout, master, working })
    }

    /// The model's dimensions.
    pub fn config(&self) -> &Gpt2Config {
        &self.config
    }

    /// How the model runs its ops.
    pub fn options(&self) -> ModelOptions {
        self.options
    }

    /// Where each tensor lives in the parameter, gradient and moment arenas.
    pub fn layout(&self) -> &ParamLayout {
        &self.layout
    }

    /// The f32 master weights, copied to the host.
    pub fn params_to_host(&self, backend: &B) -> Result<Params<Vec<f32>>> {
        self.layout.download(backend, &self.master)
    }

    /// The master weights and the working copy, writable (for the optimizer).
    pub fn weights_mut(&mut self) -> (F32Mut<'_, B>, Option<ActMut<'_, B>>) {
        (ViewMut::all(&mut self.master), self.working.as_mut().map(ViewMut::all))
    }

    /// Layer `l`'s slice of parameter `kind`, as the passes read it.
    fn p(&self, kind: ParamKind, l: usize) -> ActView<'_, B> {
        let weights = B::Act::weights::<B>(&self.master, self.working.as_ref());
        View::of(weights, self.layout.layer(kind, l))
    }

    fn dims(&self, b: usize, t: usize, acts: &Activations<B>) -> Dims {
        let cfg = &self.config;
        Dims {
            b,
            t,
            c: cfg.channels,
            nh: cfg.num_heads,
            v: cfg.vocab_size,
            vp: cfg.padded_vocab_size,
            logits_ld: acts.logits_ld,
        }
    }

    /// The gradient windows of layer `l`'s `weight` (and `bias`) in the gradient arena.
    fn grads<'g>(
        &self,
        arena: &'g mut Buf<B, f32>,
        l: usize,
        weight: ParamKind,
        bias: Option<ParamKind>,
        write: GradWrite,
    ) -> ParamGrads<'g, B> {
        ParamGrads {
            arena: ViewMut::all(arena),
            weight: self.layout.layer(weight, l),
            bias: bias.map(|kind| self.layout.layer(kind, l)),
            pre_act_bias: None,
            residual_bias: None,
            write,
        }
    }

    /// Forward pass of `b × t` tokens: fills `acts` up to the logits.
    pub fn forward(
        &self,
        backend: &B,
        acts: &mut Activations<B>,
        inputs: &B::Tokens,
        b: usize,
        t: usize,
    ) -> Result<()> {
        let cfg = &self.config;
        assert!(b <= acts.max_b && t <= acts.max_t, "batch larger than the activations");
        let dims = self.dims(b, t, acts);
        let (c, nh, bt, layers) = (cfg.channels, cfg.num_heads, b * t, cfg.num_layers);
        let n = bt * c;
        let fuse = self.options.fuse;
        let a = acts;
        let linear = |layer, inp, out| Linear::new(layer, bt, inp, out);
        backend.encoder_forward(
            a.encoded.at_mut(0, n),
            inputs,
            self.p(ParamKind::Wte, 0),
            self.p(ParamKind::Wpe, 0),
            dims,
        )?;
        backend.layernorm_forward(
            LayerNormForward {
                out: a.ln1.at_mut(0, n),
                stats: LayerNormStats {
                    mean: a.ln1_mean.at_mut(0, bt),
                    rstd: a.ln1_rstd.at_mut(0, bt),
                },
                inp: a.encoded.at(0, n),
                weight: self.p(ParamKind::Ln1w, 0),
                bias: self.p(ParamKind::Ln1b, 0),
            },
            bt,
            c,
        )?;
        for l in 0..layers {
            let residual = if l == 0 { a.encoded.at(0, n) } else { a.residual3.at(l - 1, n) };
            backend.matmul_forward(
                MatmulForward {
                    out: a.qkv.at_mut(l, 3 * n),
                    inp: a.ln1.at(l, n),
                    weight: self.p(ParamKind::Qkvw, l),
                    bias: Some(self.p(ParamKind::Qkvb, l)),
                    activation: Activation::None,
                },
                linear("qkv", c, 3 * c),
            )?;
            backend.attention_forward(
                AttentionForward {
                    out: a.atty.at_mut(l, n),
                    saved: a.att.saved_mut(l, b, nh, t),
                    qkv: a.qkv.at(l, 3 * n),
                },
                dims,
            )?;
            backend.matmul_forward(
                MatmulForward {
                    out: a.attproj.at_mut(l, n),
                    inp: a.atty.at(l, n),
                    weight: self.p(ParamKind::Attprojw, l),
                    bias: Some(self.p(ParamKind::Attprojb, l)),
                    activation: Activation::None,
                },
                linear("attention projection", c, c),
            )?;
            self.residual_layernorm(
                backend,
                ResidualLayerNormForward {
                    residual: a.residual2.at_mut(l, n),
                    inp1: residual,
                    inp2: a.attproj.at(l, n),
                    out: a.ln2.at_mut(l, n),
                    stats: LayerNormStats {
                        mean: a.ln2_mean.at_mut(l, bt),
                        rstd: a.ln2_rstd.at_mut(l, bt),
                    },
                    weight: self.p(ParamKind::Ln2w, l),
                    bias: self.p(ParamKind::Ln2b, l),
                },
                bt,
            )?;
            let fc = |out, activation| MatmulForward {
                out,
                inp: a.ln2.at(l, n),
                weight: self.p(ParamKind::Fcw, l),
                bias: Some(self.p(ParamKind::Fcb, l)),
                activation,
            };
            if fuse {
                let pre_act = a.fch.at_mut(l, 4 * n);
                backend.matmul_forward(
                    fc(a.fch_gelu.at_mut(l, 4 * n), Activation::Gelu { pre_act }),
                    linear("fc", c, 4 * c),
                )?;
            } else {
                backend.matmul_forward(
                    fc(a.fch.at_mut(l, 4 * n), Activation::None),
                    linear("fc", c, 4 * c),
                )?;
                backend.gelu_forward(a.fch_gelu.at_mut(l, 4 * n), a.fch.at(l, 4 * n))?;
            }
            backend.matmul_forward(
                MatmulForward {
                    out: a.fcproj.at_mut(l, n),
                    inp: a.fch_gelu.at(l, 4 * n),
                    weight: self.p(ParamKind::Fcprojw, l),
                    bias: Some(self.p(ParamKind::Fcprojb, l)),
                    activation: Activation::None,
                },
                linear("fc projection", 4 * c, c),
            )?;
            // The residual add closing layer l feeds the next layernorm: layer l + 1's first,
            // or the final one.
            let (out, stats, weight, bias) = if l + 1 == layers {
                let stats = LayerNormStats {
                    mean: a.lnf_mean.at_mut(0, bt),
                    rstd: a.lnf_rstd.at_mut(0, bt),
                };
                (a.lnf.at_mut(0, n), stats, self.p(ParamKind::Lnfw, 0), self.p(ParamKind::Lnfb, 0))
            } else {
                let stats = LayerNormStats {
                    mean: a.ln1_mean.at_mut(l + 1, bt),
                    rstd: a.ln1_rstd.at_mut(l + 1, bt),
                };
                let (w, b) = (self.p(ParamKind::Ln1w, l + 1), self.p(ParamKind::Ln1b, l + 1));
                (a.ln1.at_mut(l + 1, n), stats, w, b)
            };
            self.residual_layernorm(
                backend,
                ResidualLayerNormForward {
                    residual: a.residual3.at_mut(l, n),
                    inp1: a.residual2.at(l, n),
                    inp2: a.fcproj.at(l, n),
                    out,
                    stats,
                    weight,
                    bias,
                },
                bt,
            )?;
        }
        let ld = a.logits_ld;
        backend.matmul_forward(
            MatmulForward {
                out: a.logits.at_mut(0, bt * ld),
                inp: a.lnf.at(0, n),
                weight: self.p(ParamKind::Wte, 0),
                bias: None,
                activation: Activation::None,
            },
            Linear::lm_head(bt, c, cfg.padded_vocab_size, ld),
        )
    }

    /// `residual = inp1 + inp2` and its layernorm: one fused op, or (unfused) a residual add
    /// and a layernorm.
    fn residual_layernorm(
        &self,
        backend: &B,
        args: ResidualLayerNormForward<'_, B>,
        rows: usize,
    ) -> Result<()> {
        let c = self.config.channels;
        if self.options.fuse {
            return backend.residual_layernorm_forward(args, rows, c);
        }
        let ResidualLayerNormForward { mut residual, inp1, inp2, out, stats, weight, bias } = args;
        backend.residual_forward(residual.reborrow(), inp1, inp2)?;
        let inp = residual.as_view();
        backend.layernorm_forward(LayerNormForward { out, stats, inp, weight, bias }, rows, c)
    }

    /// After [`Gpt2::forward`]: the cross-entropy loss of every position against `targets`
    /// into `losses` (`b·t`, left on the device), and with `dloss` (training) the logits
    /// replaced by their gradient scaled by `dloss` (see [`cpu_ref::fused_classifier`]).
    pub fn classify(
        &self,
        backend: &B,
        acts: &mut Activations<B>,
        targets: &B::Tokens,
        losses: F32Mut<'_, B>,
        (b, t): (usize, usize),
        dloss: Option<f32>,
    ) -> Result<()> {
        let dims = self.dims(b, t, acts);
        let logits = acts.logits.at_mut(0, dims.bt() * dims.logits_ld);
        backend.fused_classifier(Classifier { logits, losses, targets, dloss }, dims)
    }

    /// Backward pass after [`Gpt2::forward`] and [`Gpt2::classify`]: writes the parameter
    /// gradients into the arena `grads` (laid out as [`Gpt2::layout`]) as `write` says, every
    /// element of it under [`GradWrite::Replace`] (the arena's old values are never read, so a
    /// step's first micro-batch needs no zeroing).
    pub fn backward(
        &self,
        backend: &B,
        acts: &Activations<B>,
        inputs: &mut B::Tokens,
        (grads, write): (&mut Buf<B, f32>, GradWrite),
        scratch: &mut GradScratch<B>,
        (b, t): (usize, usize),
    ) -> Result<()> {
        let cfg = &self.config;
        let dims = self.dims(b, t, acts);
        let (c, nh, bt, vp) = (cfg.channels, cfg.num_heads, b * t, cfg.padded_vocab_size);
        let n = bt * c;
        let (a, s) = (acts, scratch);
        let linear = |layer, inp, out| Linear::new(layer, bt, inp, out);
        use ParamKind as K;
        // Fused, the attention and fc projections' bias gradients are the column sums of the
        // residual stream's gradient where they add to the stream, which the backward of the
        // layernorm reading the stream there writes: it adds them up as it stores them (on the
        // GPU). fcproj's backward also gives fc's bias gradient (from the column sums its dX
        // GEMM writes). Unfused, each layer's backward takes its own.
        let fused = s.dfch_gelu.is_none();
        let residual_bias = |kind, l| fused.then(|| self.layout.layer(kind, l));
        let projection_bias = |kind| (!fused).then_some(kind);

        backend.matmul_backward(
            MatmulBackward {
                dinp: s.dln.at_mut(0, n),
                grads: self.grads(grads, 0, K::Wte, None, write),
                dout: a.logits.at(0, bt * a.logits_ld),
                inp: a.lnf.at(0, n),
                weight: self.p(K::Wte, 0),
                gelu_pre_act: None,
            },
            Linear::lm_head(bt, c, vp, a.logits_ld),
        )?;
        backend.zero(s.dres.at_mut(0, n))?;
        let last = cfg.num_layers - 1;
        backend.layernorm_backward(
            LayerNormBackward {
                dinp: s.dres.at_mut(0, n),
                grads: ParamGrads {
                    residual_bias: residual_bias(K::Fcprojb, last),
                    ..self.grads(grads, 0, K::Lnfw, Some(K::Lnfb), write)
                },
                dout: s.dln.at(0, n),
                inp: a.residual3.at(last, n),
                weight: self.p(K::Lnfw, 0),
                mean: a.lnf_mean.at(0, bt),
                rstd: a.lnf_rstd.at(0, bt),
            },
            bt,
            c,
        )?;
        // From here on `dres` is the gradient of the residual stream: first of layer l's
        // output (residual3), then, once the MLP's layernorm adds its part, of residual2, and
        // once the attention's layernorm adds its part, of layer l's input.
        for l in (0..cfg.num_layers).rev() {
            let residual = if l == 0 { a.encoded.at(0, n) } else { a.residual3.at(l - 1, n) };
            let fcproj_bias = projection_bias(K::Fcprojb);
            let fcproj_grads = self.grads(grads, l, K::Fcprojw, fcproj_bias, write);
            let fcproj = |dinp, grads, gelu_pre_act| MatmulBackward {
                dinp,
                grads,
                dout: s.dres.at(0, n),
                inp: a.fch_gelu.at(l, 4 * n),
                weight: self.p(K::Fcprojw, l),
                gelu_pre_act,
            };
            match &mut s.dfch_gelu {
                None => {
                    let fc_bias = self.layout.layer(K::Fcb, l);
                    let grads = ParamGrads { pre_act_bias: Some(fc_bias), ..fcproj_grads };
                    let args = fcproj(s.dfch.at_mut(0, 4 * n), grads, Some(a.fch.at(l, 4 * n)));
                    backend.matmul_backward(args, linear("fc projection", 4 * c, c))?;
                }
                Some(dfch_gelu) => {
                    let args = fcproj(dfch_gelu.at_mut(0, 4 * n), fcproj_grads, None);
                    backend.matmul_backward(args, linear("fc projection", 4 * c, c))?;
                    backend.gelu_backward(
                        s.dfch.at_mut(0, 4 * n),
                        a.fch.at(l, 4 * n),
                        dfch_gelu.at(0, 4 * n),
                    )?;
                }
            }
            backend.matmul_backward(
                MatmulBackward {
                    dinp: s.dln.at_mut(0, n),
                    grads: self.grads(grads, l, K::Fcw, (!fused).then_some(K::Fcb), write),
                    dout: s.dfch.at(0, 4 * n),
                    inp: a.ln2.at(l, n),
                    weight: self.p(K::Fcw, l),
                    gelu_pre_act: None,
                },
                linear("fc", c, 4 * c),
            )?;
            backend.layernorm_backward(
                LayerNormBackward {
                    dinp: s.dres.at_mut(0, n),
                    grads: ParamGrads {
                        residual_bias: residual_bias(K::Attprojb, l),
                        ..self.grads(grads, l, K::Ln2w, Some(K::Ln2b), write)
                    },
                    dout: s.dln.at(0, n),
                    inp: a.residual2.at(l, n),
                    weight: self.p(K::Ln2w, l),
                    mean: a.ln2_mean.at(l, bt),
                    rstd: a.ln2_rstd.at(l, bt),
                },
                bt,
                c,
            )?;
            backend.matmul_backward(
                MatmulBackward {
                    dinp: s.datty.at_mut(0, n),
                    grads: self.grads(grads, l, K::Attprojw, projection_bias(K::Attprojb), write),
                    dout: s.dres.at(0, n),
                    inp: a.atty.at(l, n),
                    weight: self.p(K::Attprojw, l),
                    gelu_pre_act: None,
                },
                linear("attention projection", c, c),
            )?;
            // Under flash attention, its backward also gives qkv's bias gradient (from the
            // column sums its kernels write of dqkv).
            let saved = a.att.saved(l, b, nh, t);
            let flash = matches!(saved, AttentionSavedView::Lse(_));
            let qkv_bias = self.layout.layer(K::Qkvb, l);
            backend.attention_backward(
                AttentionBackward {
                    dqkv: s.dqkv.at_mut(0, 3 * n),
                    dout: s.datty.at(0, n),
                    qkv: a.qkv.at(l, 3 * n),
                    out: a.atty.at(l, n),
                    saved,
                    qkv_bias: flash
                        .then(|| GradWindow { grad: ViewMut::of(grads, qkv_bias), write }),
                },
                dims,
            )?;
            backend.matmul_backward(
                MatmulBackward {
                    dinp: s.dln.at_mut(0, n),
                    grads: self.grads(grads, l, K::Qkvw, (!flash).then_some(K::Qkvb), write),
                    dout: s.dqkv.at(0, 3 * n),
                    inp: a.ln1.at(l, n),
                    weight: self.p(K::Qkvw, l),
                    gelu_pre_act: None,
                },
                linear("qkv", c, 3 * c),
            )?;
            backend.layernorm_backward(
                LayerNormBackward {
                    dinp: s.dres.at_mut(0, n),
                    grads: ParamGrads {
                        // Layer 0's input is the embeddings': no bias.
                        residual_bias: l.checked_sub(1).and_then(|p| residual_bias(K::Fcprojb, p)),
                        ..self.grads(grads, l, K::Ln1w, Some(K::Ln1b), write)
                    },
                    dout: s.dln.at(0, n),
                    inp: residual,
                    weight: self.p(K::Ln1w, l),
                    mean: a.ln1_mean.at(l, bt),
                    rstd: a.ln1_rstd.at(l, bt),
                },
                bt,
                c,
            )?;
        }
        // The token embedding's window holds the lm head's gradient: the encoder adds to it
        // (and to wpe's, zeroed first on a first micro-batch).
        if write == GradWrite::Replace {
            backend.zero(ViewMut::of(grads, self.layout.layer(K::Wpe, 0)))?;
        }
        backend.encoder_backward(
            self.grads(grads, 0, K::Wte, Some(K::Wpe), GradWrite::Accumulate),
            s.dres.at(0, n),
            inputs,
            dims,
        )
    }
}
