//! Residual connection: `out = inp1 + inp2`.
//!
//! Its backward is the identity into both inputs, so it has no function of its own: the
//! trainer keeps one residual-stream gradient that the layernorm backwards accumulate into.

/// Forward of a residual connection: `out[i] = inp1[i] + inp2[i]`.
///
/// # Panics
/// If the lengths differ.
pub fn residual_forward(out: &mut [f32], inp1: &[f32], inp2: &[f32]) {
    crate::elementwise::add(inp1, inp2, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    #[test]
    fn forward_matches_naive_f64() {
        let mut rng = rng(50);
        let a = uniform(&mut rng, 70_001, 3.0);
        let b = uniform(&mut rng, 70_001, 3.0);
        let mut out = vec![f32::NAN; a.len()];
        residual_forward(&mut out, &a, &b);
        let want: Vec<f64> = f64s(&a).iter().zip(f64s(&b)).map(|(a, b)| a + b).collect();
        assert_close("out", &out, &want, 1e-7);
    }
}
