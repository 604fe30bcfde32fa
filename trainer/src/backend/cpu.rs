//! The CPU backend: host `Vec`s and the `cpu_ref` functions, parallel over the rayon pool.

use super::{AdamWStep, Backend, View, ViewMut};
use crate::error::{Error, Result};
use rayon::prelude::*;

/// Runs every op with `cpu_ref` on host memory (rayon's global pool, one thread per core
/// unless `RAYON_NUM_THREADS` says otherwise).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

fn zeros<T: Clone + Default>(len: usize) -> Result<Vec<T>> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(len).map_err(|_| {
        Error::Backend(format!(
            "out of memory allocating {len} elements ({:.1} GiB)",
            (len * size_of::<T>()) as f64 / (1u64 << 30) as f64
        ))
    })?;
    buf.resize(len, T::default());
    Ok(buf)
}

impl Backend for CpuBackend {
    type Buffer = Vec<f32>;
    type Tokens = Vec<u32>;

    fn describe(&self) -> String {
        format!("CPU ({} threads)", rayon::current_num_threads())
    }

    fn alloc(&self, len: usize) -> Result<Vec<f32>> {
        zeros(len)
    }

    fn alloc_tokens(&self, len: usize) -> Result<Vec<u32>> {
        zeros(len)
    }

    fn upload(&self, src: &[f32], dst: ViewMut<'_, Vec<f32>>) -> Result<()> {
        dst.into_slice().copy_from_slice(src);
        Ok(())
    }

    fn upload_tokens(&self, src: &[u32], dst: ViewMut<'_, Vec<u32>>) -> Result<()> {
        dst.into_slice().copy_from_slice(src);
        Ok(())
    }

    fn download(&self, src: View<'_, Vec<f32>>, dst: &mut [f32]) -> Result<()> {
        dst.copy_from_slice(src.as_slice());
        Ok(())
    }

    fn zero(&self, dst: ViewMut<'_, Vec<f32>>) -> Result<()> {
        dst.into_slice().par_chunks_mut(1 << 16).for_each(|chunk| chunk.fill(0.0));
        Ok(())
    }

    fn encoder_forward(
        &self,
        out: ViewMut<'_, Vec<f32>>,
        tokens: View<'_, Vec<u32>>,
        wte: View<'_, Vec<f32>>,
        wpe: View<'_, Vec<f32>>,
        b: usize,
        t: usize,
        c: usize,
    ) -> Result<()> {
        cpu_ref::encoder_forward(
            out.into_slice(),
            tokens.as_slice(),
            wte.as_slice(),
            wpe.as_slice(),
            b,
            t,
            c,
        );
        Ok(())
    }

    fn encoder_backward(
        &self,
        dwte: ViewMut<'_, Vec<f32>>,
        dwpe: ViewMut<'_, Vec<f32>>,
        dout: View<'_, Vec<f32>>,
        tokens: View<'_, Vec<u32>>,
        b: usize,
        t: usize,
        c: usize,
    ) -> Result<()> {
        cpu_ref::encoder_backward(
            dwte.into_slice(),
            dwpe.into_slice(),
            dout.as_slice(),
            tokens.as_slice(),
            b,
            t,
            c,
        );
        Ok(())
    }

    fn layernorm_forward(
        &self,
        out: ViewMut<'_, Vec<f32>>,
        mean: ViewMut<'_, Vec<f32>>,
        rstd: ViewMut<'_, Vec<f32>>,
        inp: View<'_, Vec<f32>>,
        weight: View<'_, Vec<f32>>,
        bias: View<'_, Vec<f32>>,
        bt: usize,
        c: usize,
    ) -> Result<()> {
        cpu_ref::layernorm_forward(
            out.into_slice(),
            mean.into_slice(),
            rstd.into_slice(),
            inp.as_slice(),
            weight.as_slice(),
            bias.as_slice(),
            bt,
            c,
        );
        Ok(())
    }

    fn layernorm_backward(
        &self,
        dinp: ViewMut<'_, Vec<f32>>,
        dweight: ViewMut<'_, Vec<f32>>,
        dbias: ViewMut<'_, Vec<f32>>,
        dout: View<'_, Vec<f32>>,
        inp: View<'_, Vec<f32>>,
        weight: View<'_, Vec<f32>>,
        mean: View<'_, Vec<f32>>,
        rstd: View<'_, Vec<f32>>,
        bt: usize,
        c: usize,
    ) -> Result<()> {
        cpu_ref::layernorm_backward(
            dinp.into_slice(),
            dweight.into_slice(),
            dbias.into_slice(),
            dout.as_slice(),
            inp.as_slice(),
            weight.as_slice(),
            mean.as_slice(),
            rstd.as_slice(),
            bt,
            c,
        );
        Ok(())
    }

    fn matmul_forward(
        &self,
        out: ViewMut<'_, Vec<f32>>,
        inp: View<'_, Vec<f32>>,
        weight: View<'_, Vec<f32>>,
        bias: Option<View<'_, Vec<f32>>>,
        bt: usize,
        c: usize,
        oc: usize,
    ) -> Result<()> {
        cpu_ref::matmul_forward(
            out.into_slice(),
            inp.as_slice(),
            weight.as_slice(),
            bias.as_ref().map(View::as_slice),
            bt,
            c,
            oc,
        );
        Ok(())
    }

    fn matmul_backward(
        &self,
        dinp: ViewMut<'_, Vec<f32>>,
        dweight: ViewMut<'_, Vec<f32>>,
        dbias: Option<ViewMut<'_, Vec<f32>>>,
        dout: View<'_, Vec<f32>>,
        inp: View<'_, Vec<f32>>,
        weight: View<'_, Vec<f32>>,
        bt: usize,
        c: usize,
        oc: usize,
    ) -> Result<()> {
        cpu_ref::matmul_backward(
            dinp.into_slice(),
            dweight.into_slice(),
            dbias.map(ViewMut::into_slice),
            dout.as_slice(),
            inp.as_slice(),
            weight.as_slice(),
            bt,
            c,
            oc,
        );
        Ok(())
    }

    fn attention_forward(
        &self,
        out: ViewMut<'_, Vec<f32>>,
        att: ViewMut<'_, Vec<f32>>,
        qkv: View<'_, Vec<f32>>,
        b: usize,
        t: usize,
        c: usize,
        nh: usize,
    ) -> Result<()> {
        cpu_ref::attention_forward(out.into_slice(), att.into_slice(), qkv.as_slice(), b, t, c, nh);
        Ok(())
    }

    fn attention_backward(
        &self,
        dqkv: ViewMut<'_, Vec<f32>>,
        dout: View<'_, Vec<f32>>,
        qkv: View<'_, Vec<f32>>,
        att: View<'_, Vec<f32>>,
        b: usize,
        t: usize,
        c: usize,
        nh: usize,
    ) -> Result<()> {
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
    }

    fn gelu_forward(&self, out: ViewMut<'_, Vec<f32>>, inp: View<'_, Vec<f32>>) -> Result<()> {
        cpu_ref::gelu_forward(out.into_slice(), inp.as_slice());
        Ok(())
    }

    fn gelu_backward(
        &self,
        dinp: ViewMut<'_, Vec<f32>>,
        inp: View<'_, Vec<f32>>,
        dout: View<'_, Vec<f32>>,
    ) -> Result<()> {
        cpu_ref::gelu_backward(dinp.into_slice(), inp.as_slice(), dout.as_slice());
        Ok(())
    }

    fn residual_forward(
        &self,
        out: ViewMut<'_, Vec<f32>>,
        inp1: View<'_, Vec<f32>>,
        inp2: View<'_, Vec<f32>>,
    ) -> Result<()> {
        cpu_ref::residual_forward(out.into_slice(), inp1.as_slice(), inp2.as_slice());
        Ok(())
    }

    fn fused_classifier(
        &self,
        logits: ViewMut<'_, Vec<f32>>,
        losses: ViewMut<'_, Vec<f32>>,
        targets: View<'_, Vec<u32>>,
        dloss: f32,
        bt: usize,
        v: usize,
        vp: usize,
    ) -> Result<()> {
        cpu_ref::fused_classifier(
            logits.into_slice(),
            losses.into_slice(),
            targets.as_slice(),
            dloss,
            bt,
            v,
            vp,
        );
        Ok(())
    }

    fn global_norm(&self, tensors: &[View<'_, Vec<f32>>]) -> Result<f32> {
        let slices: Vec<&[f32]> = tensors.iter().map(View::as_slice).collect();
        Ok(cpu_ref::global_norm(&slices))
    }

    fn adamw_update(
        &self,
        params: ViewMut<'_, Vec<f32>>,
        grads: View<'_, Vec<f32>>,
        m: ViewMut<'_, Vec<f32>>,
        v: ViewMut<'_, Vec<f32>>,
        step: &AdamWStep,
    ) -> Result<()> {
        cpu_ref::adamw_update(
            params.into_slice(),
            grads.as_slice(),
            m.into_slice(),
            v.into_slice(),
            step,
        );
        Ok(())
    }
}
