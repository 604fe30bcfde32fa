//! The CPU backend: host `Vec`s and the `cpu_ref` functions, parallel over the rayon pool.
//!
//! f32 throughout (`--precision fp32`): it is the reference the other backends are compared
//! with and reproduces llm.c's CPU trainer. Fused ops run as their unfused sequence, with the
//! same arithmetic.

use super::memory::{host_available, host_shortfall, human_size};
use super::op_times::{OpLabel, OpRecorder, host_stamp, names};
use super::op_work;
use super::ops::{
    AdamWArgs, AdamWHyper, AttentionBackward, AttentionForward, AttentionSaved, AttentionSavedView,
    Classifier, Dims, ENCODER_ACCUMULATES, GradWrite, LayerNormBackward, LayerNormForward, Linear,
    MatmulBackward, MatmulForward, ParamGrads, ResidualLayerNormForward,
};
use super::view::disjoint_windows;
use super::{ActMut, ActView, ArenaTensor, Backend, Element, GradNorm, Precision, TokenShape};
use super::{View, ViewMut};
use crate::error::{Error, Result};
use cpu_ref::adamw::AdamWArena;
use rayon::prelude::*;

/// Runs every op with `cpu_ref` on host memory (rayon's global pool, one thread per core
/// unless `RAYON_NUM_THREADS` says otherwise).
#[derive(Default)]
pub struct CpuBackend {
    ops: OpRecorder,
}

impl CpuBackend {
    /// Runs `op`, recorded as `label()` (its name and work) on the host clock while the op
    /// recorder is on (every op has finished when it returns).
    fn timed<R>(
        &self,
        label: impl FnOnce() -> OpLabel,
        op: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.ops.time(label, host_stamp, op)
    }
}

/// Bytes of an activation element: the CPU backend computes in f32.
const ACT: f64 = 4.0;

/// A validated batch of token ids in host memory.
#[derive(Clone, Debug)]
pub struct CpuTokens {
    ids: Vec<u32>,
    shape: TokenShape,
}

impl CpuTokens {
    /// How many distinct ids the batch holds.
    fn distinct(&self) -> usize {
        let mut ids = self.ids.clone();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }
}

fn zeros<T: Clone + Default>(len: usize, what: &str) -> Result<Vec<T>> {
    let bytes = len.saturating_mul(size_of::<T>());
    if let Some(message) = host_shortfall(what, bytes, host_available()) {
        return Err(Error::Backend(message));
    }
    let mut buf = Vec::new();
    buf.try_reserve_exact(len).map_err(|_| {
        Error::Backend(format!(
            "out of host memory allocating {what}: {} requested; use a smaller --model or \
             --batch-size, or a GPU",
            human_size(bytes)
        ))
    })?;
    buf.resize(len, T::default());
    Ok(buf)
}

/// The checks the CUDA backend's token upload makes, with the same messages.
fn check_tokens(op: &'static str, ids: &[u32], shape: TokenShape) -> Result<()> {
    shape.check_ids(op, ids).map(drop).map_err(|e| Error::invalid(e.to_string()))
}

/// The windows of one op's gradients (see [`ParamGrads`]).
struct GradWindows<'a> {
    weight: &'a mut [f32],
    bias: Option<&'a mut [f32]>,
    pre_act_bias: Option<&'a mut [f32]>,
    residual_bias: Option<&'a mut [f32]>,
}

/// The windows of `grads`, zeroed under [`GradWrite::Replace`]: the `cpu_ref` ops accumulate,
/// and `0 + x` keeps the bits llm.c's zeroed gradients give.
fn grad_windows(grads: ParamGrads<'_, CpuBackend>) -> GradWindows<'_> {
    let ParamGrads { arena, weight, bias, pre_act_bias, residual_bias, write } = grads;
    let ranges = [Some(weight), bias, pre_act_bias, residual_bias];
    let mut windows = disjoint_windows(arena.into_slice(), ranges);
    if write == GradWrite::Replace {
        windows.iter_mut().flatten().for_each(|window| window.fill(0.0));
    }
    let [weight, bias, pre_act_bias, residual_bias] = windows;
    GradWindows { weight: weight.expect("present"), bias, pre_act_bias, residual_bias }
}

/// The weight and bias windows of the gradients of an op that adds no other bias gradient.
fn weight_and_bias(grads: ParamGrads<'_, CpuBackend>) -> (&mut [f32], Option<&mut [f32]>) {
    assert!(grads.pre_act_bias.is_none(), "only a matmul backward fuses the GELU backward");
    assert!(grads.residual_bias.is_none(), "only a layernorm backward sums its dinp");
    let GradWindows { weight, bias, .. } = grad_windows(grads);
    (weight, bias)
}

impl Backend for CpuBackend {
    type Act = f32;
    type Buf<T: Element> = Vec<T>;
    type Tokens = CpuTokens;
    type AdamWTable = Vec<ArenaTensor>;

    fn describe(&self) -> String {
        format!("CPU ({} threads), fp32", rayon::current_num_threads())
    }

    fn precision(&self) -> Precision {
        Precision::Fp32
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn op_recorder(&self) -> &OpRecorder {
        &self.ops
    }

    fn alloc<T: Element>(&self, len: usize, what: &str) -> Result<Vec<T>> {
        zeros(len, what)
    }

    fn upload<T: Element>(&self, src: &[T], dst: ViewMut<'_, Vec<T>>) -> Result<()> {
        self.timed(
            || op_work::host_copy(names::UPLOAD),
            || {
                dst.into_slice().copy_from_slice(src);
                Ok(())
            },
        )
    }

    fn download<T: Element>(&self, src: View<'_, Vec<T>>, dst: &mut [T]) -> Result<()> {
        self.timed(
            || op_work::host_copy(names::DOWNLOAD),
            || {
                dst.copy_from_slice(src.as_slice());
                Ok(())
            },
        )
    }

    fn zero<T: Element>(&self, dst: ViewMut<'_, Vec<T>>) -> Result<()> {
        let len = dst.len();
        self.timed(
            || op_work::zero(len, size_of::<T>() as f64),
            || {
                dst.into_slice().par_chunks_mut(1 << 16).for_each(|chunk| chunk.fill(T::default()));
                Ok(())
            },
        )
    }

    fn round_to_act(&self, src: View<'_, Vec<f32>>, dst: ViewMut<'_, Vec<f32>>) -> Result<()> {
        let len = src.len();
        self.timed(
            || op_work::round_to_act(len, ACT),
            || {
                dst.into_slice().copy_from_slice(src.as_slice());
                Ok(())
            },
        )
    }

    fn upload_tokens(&self, ids: &[u32], shape: TokenShape) -> Result<CpuTokens> {
        check_tokens("upload_tokens", ids, shape)?;
        Ok(CpuTokens { ids: ids.to_vec(), shape })
    }

    fn replace_tokens(&self, tokens: &mut CpuTokens, ids: &[u32]) -> Result<()> {
        self.timed(
            || op_work::host_copy(names::TOKENS),
            || {
                check_tokens("replace_tokens", ids, tokens.shape)?;
                tokens.ids.copy_from_slice(ids);
                Ok(())
            },
        )
    }

    fn encoder_forward(
        &self,
        out: ActMut<'_, Self>,
        tokens: &CpuTokens,
        wte: ActView<'_, Self>,
        wpe: ActView<'_, Self>,
        dims: Dims,
    ) -> Result<()> {
        self.timed(
            || op_work::encoder_forward(dims, ACT, tokens.distinct()),
            || {
                let (b, t, c) = (dims.b, dims.t, dims.c);
                cpu_ref::encoder_forward(
                    out.into_slice(),
                    &tokens.ids,
                    wte.as_slice(),
                    wpe.as_slice(),
                    b,
                    t,
                    c,
                );
                Ok(())
            },
        )
    }

    fn encoder_backward(
        &self,
        grads: ParamGrads<'_, Self>,
        dout: ActView<'_, Self>,
        tokens: &mut CpuTokens,
        dims: Dims,
    ) -> Result<()> {
        self.timed(
            || op_work::encoder_backward(dims, ACT, tokens.distinct()),
            || {
                let (b, t, c) = (dims.b, dims.t, dims.c);
                assert_eq!(grads.write, GradWrite::Accumulate, "{ENCODER_ACCUMULATES}");
                let (dwte, dwpe) = weight_and_bias(grads);
                let dwpe = dwpe.expect("the encoder's grads name wpe as the bias");
                cpu_ref::encoder_backward(dwte, dwpe, dout.as_slice(), &tokens.ids, b, t, c);
                Ok(())
            },
        )
    }

    fn layernorm_forward(
        &self,
        args: LayerNormForward<'_, Self>,
        rows: usize,
        c: usize,
    ) -> Result<()> {
        self.timed(
            || op_work::layernorm_forward(rows, c, ACT),
            || {
                let LayerNormForward { out, stats, inp, weight, bias } = args;
                cpu_ref::layernorm_forward(
                    out.into_slice(),
                    stats.mean.into_slice(),
                    stats.rstd.into_slice(),
                    inp.as_slice(),
                    weight.as_slice(),
                    bias.as_slice(),
                    rows,
                    c,
                );
                Ok(())
            },
        )
    }

    fn residual_layernorm_forward(
        &self,
        args: ResidualLayerNormForward<'_, Self>,
        rows: usize,
        c: usize,
    ) -> Result<()> {
        self.timed(
            || op_work::residual_layernorm_forward(rows, c, ACT),
            || {
                let ResidualLayerNormForward { residual, inp1, inp2, out, stats, weight, bias } =
                    args;
                let residual = residual.into_slice();
                cpu_ref::residual_forward(residual, inp1.as_slice(), inp2.as_slice());
                cpu_ref::layernorm_forward(
                    out.into_slice(),
                    stats.mean.into_slice(),
                    stats.rstd.into_slice(),
                    residual,
                    weight.as_slice(),
                    bias.as_slice(),
                    rows,
                    c,
                );
                Ok(())
            },
        )
    }

    fn layernorm_backward(
        &self,
        args: LayerNormBackward<'_, Self>,
        rows: usize,
        c: usize,
    ) -> Result<()> {
        let colsum = args.grads.residual_bias.is_some();
        self.timed(
            || op_work::layernorm_backward(rows, c, ACT, colsum),
            || {
                let LayerNormBackward { dinp, grads, dout, inp, weight, mean, rstd } = args;
                assert!(grads.pre_act_bias.is_none(), "only a matmul backward fuses GELU's");
                let GradWindows { weight: dweight, bias: dbias, residual_bias, .. } =
                    grad_windows(grads);
                let dinp = dinp.into_slice();
                cpu_ref::layernorm_backward(
                    dinp,
                    dweight,
                    dbias.expect("layernorm gradients have a bias"),
                    dout.as_slice(),
                    inp.as_slice(),
                    weight.as_slice(),
                    mean.as_slice(),
                    rstd.as_slice(),
                    rows,
                    c,
                );
                // The same sums as the projection's own backward would take of `dinp`.
                if let Some(residual_bias) = residual_bias {
                    cpu_ref::matmul_backward_bias(residual_bias, dinp, rows, c);
                }
                Ok(())
            },
        )
    }

    fn matmul_forward(&self, args: MatmulForward<'_, Self>, shape: Linear) -> Result<()> {
        let (bias, gelu) = (args.bias.is_some(), args.gelu());
        self.timed(
            || op_work::matmul_forward(shape, ACT, bias, gelu),
            || {
                let MatmulForward { out, inp, weight, bias, activation } = args;
                let (inp, weight, bias) =
                    (inp.as_slice(), weight.as_slice(), bias.map(|b| b.as_slice()));
                let Linear { rows, inp: c, out: oc, out_ld, .. } = shape;
                assert_eq!(out_ld, oc, "the CPU backend stores outputs densely");
                match activation {
                    super::ops::Activation::None => {
                        cpu_ref::matmul_forward(out.into_slice(), inp, weight, bias, rows, c, oc);
                    }
                    super::ops::Activation::Gelu { pre_act } => {
                        let pre_act = pre_act.into_slice();
                        cpu_ref::matmul_forward(pre_act, inp, weight, bias, rows, c, oc);
                        cpu_ref::gelu_forward(out.into_slice(), pre_act);
                    }
                }
                Ok(())
            },
        )
    }

    /// `cpu_ref::matmul_backward`'s three parts, each timed as its own op (as on the GPU).
    fn matmul_backward(&self, args: MatmulBackward<'_, Self>, shape: Linear) -> Result<()> {
        let MatmulBackward { dinp, grads, dout, inp, weight, gelu_pre_act } = args;
        let Linear { rows, inp: c, out: oc, out_ld, .. } = shape;
        assert_eq!(out_ld, oc, "the CPU backend stores outputs densely");
        assert!(grads.residual_bias.is_none(), "only a layernorm backward sums its dinp");
        let GradWindows { weight: dweight, bias: dbias, pre_act_bias, .. } = grad_windows(grads);
        let dout = dout.as_slice();
        let gelu = gelu_pre_act.is_some();
        assert!(gelu || pre_act_bias.is_none(), "a pre-activation bias needs the GELU backward");
        let dinp = dinp.into_slice();
        self.timed(
            || op_work::matmul_backward_input(shape, ACT, gelu),
            || {
                cpu_ref::matmul_backward_input(dinp, dout, weight.as_slice(), rows, c, oc);
                if let Some(pre_act) = gelu_pre_act {
                    cpu_ref::gelu_backward_in_place(dinp, pre_act.as_slice());
                }
                Ok(())
            },
        )?;
        if let Some(dbias) = pre_act_bias {
            self.timed(
                || op_work::matmul_backward_pre_act_bias(shape, ACT, false),
                || {
                    cpu_ref::matmul_backward_bias(dbias, dinp, rows, c);
                    Ok(())
                },
            )?;
        }
        self.timed(
            || op_work::matmul_backward_weight(shape, ACT),
            || {
                cpu_ref::matmul_backward_weight(dweight, dout, inp.as_slice(), rows, c, oc);
                Ok(())
            },
        )?;
        if let Some(dbias) = dbias {
            self.timed(
                || op_work::matmul_backward_bias(shape, ACT),
                || {
                    cpu_ref::matmul_backward_bias(dbias, dout, rows, oc);
                    Ok(())
                },
            )?;
        }
        Ok(())
    }

    fn attention_forward(&self, args: AttentionForward<'_, Self>, dims: Dims) -> Result<()> {
        let flash = matches!(args.saved, AttentionSaved::Lse(_));
        self.timed(
            || op_work::attention_forward(dims, ACT, flash),
            || {
                let AttentionForward { out, saved, qkv } = args;
                let AttentionSaved::Probs(att) = saved else {
                    return Err(Error::invalid(
                        "the CPU backend has no flash attention; use --attention naive",
                    ));
                };
                let (b, t, c, nh) = (dims.b, dims.t, dims.c, dims.nh);
                cpu_ref::attention_forward(
                    out.into_slice(),
                    att.into_slice(),
                    qkv.as_slice(),
                    b,
                    t,
                    c,
                    nh,
                );
                Ok(())
            },
        )
    }

    fn attention_backward(&self, args: AttentionBackward<'_, Self>, dims: Dims) -> Result<()> {
        let flash = matches!(args.saved, AttentionSavedView::Lse(_));
        self.timed(
            || op_work::attention_backward(dims, ACT, flash),
            || {
                let AttentionBackward { dqkv, dout, qkv, saved, qkv_bias, .. } = args;
                let AttentionSavedView::Probs(att) = saved else {
                    return Err(Error::invalid(
                        "the CPU backend has no flash attention; use --attention naive",
                    ));
                };
                assert!(qkv_bias.is_none(), "only flash attention writes qkv's bias gradient");
                let (b, t, c, nh) = (dims.b, dims.t, dims.c, dims.nh);
                cpu_ref::attention_backward(
                    dqkv.into_slice(),
                    dout.as_slice(),
                    qkv.as_slice(),
                    att.as_slice(),
                    b,
                    t,
                    c,
                    nh,
                );
                Ok(())
            },
        )
    }

    fn gelu_forward(&self, out: ActMut<'_, Self>, inp: ActView<'_, Self>) -> Result<()> {
        let len = out.len();
        self.timed(
            || op_work::gelu_forward(len, ACT),
            || {
                cpu_ref::gelu_forward(out.into_slice(), inp.as_slice());
                Ok(())
            },
        )
    }

    fn gelu_backward(
        &self,
        dinp: ActMut<'_, Self>,
        inp: ActView<'_, Self>,
        dout: ActView<'_, Self>,
    ) -> Result<()> {
        let len = dinp.len();
        self.timed(
            || op_work::gelu_backward(len, ACT),
            || {
                cpu_ref::gelu_backward(dinp.into_slice(), inp.as_slice(), dout.as_slice());
                Ok(())
            },
        )
    }

    fn residual_forward(
        &self,
        out: ActMut<'_, Self>,
        inp1: ActView<'_, Self>,
        inp2: ActView<'_, Self>,
    ) -> Result<()> {
        let len = out.len();
        self.timed(
            || op_work::residual_forward(len, ACT),
            || {
                cpu_ref::residual_forward(out.into_slice(), inp1.as_slice(), inp2.as_slice());
                Ok(())
            },
        )
    }

    fn fused_classifier(&self, args: Classifier<'_, Self>, dims: Dims) -> Result<()> {
        let gradient = args.dloss.is_some();
        self.timed(
            || op_work::classifier(dims, ACT, gradient),
            || {
                let Classifier { logits, losses, targets, dloss } = args;
                assert_eq!(dims.logits_ld, dims.vp, "the CPU backend's logits are dense");
                cpu_ref::fused_classifier(
                    logits.into_slice(),
                    losses.into_slice(),
                    &targets.ids,
                    dloss.unwrap_or(0.0),
                    dims.bt(),
                    dims.v,
                    dims.vp,
                );
                Ok(())
            },
        )
    }

    fn grad_norm(&self, grads: View<'_, Vec<f32>>) -> Result<GradNorm> {
        let len = grads.len();
        self.timed(
            || op_work::grad_norm(len),
            || {
                let norm = cpu_ref::global_norm(&[grads.as_slice()]);
                Ok(GradNorm { norm, nonfinite: !norm.is_finite() })
            },
        )
    }

    fn adamw_table(&self, tensors: &[ArenaTensor], arena_len: usize) -> Result<Vec<ArenaTensor>> {
        if let Some(bad) = tensors.iter().find(|e| e.offset + e.len > arena_len) {
            return Err(Error::invalid(format!(
                "an AdamW tensor at {}..{} lies outside the arena of {arena_len} elements",
                bad.offset,
                bad.offset + bad.len
            )));
        }
        Ok(tensors.to_vec())
    }

    fn adamw(
        &self,
        args: AdamWArgs<'_, Self>,
        table: &Vec<ArenaTensor>,
        hyper: &AdamWHyper,
    ) -> Result<()> {
        let (len, working) = (args.params.len(), args.working.is_some().then_some(ACT));
        self.timed(
            || op_work::adamw(len, working),
            || {
                let AdamWArgs { params, grads, m, v, working } = args;
                let step = cpu_ref::AdamWStep {
                    lr: hyper.lr,
                    beta1: hyper.beta1,
                    beta2: hyper.beta2,
                    eps: hyper.eps,
                    weight_decay: 0.0,
                    t: hyper.t,
                    grad_scale: hyper.grad_scale,
                };
                let arena = AdamWArena {
                    params: params.into_slice(),
                    grads: grads.as_slice(),
                    m: m.into_slice(),
                    v: v.into_slice(),
                    working: working.map(ViewMut::into_slice),
                };
                cpu_ref::adamw_update_arena(arena, table, &step, hyper.rounding);
                Ok(())
            },
        )
    }
}
