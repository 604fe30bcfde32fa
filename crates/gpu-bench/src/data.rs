//! Benchmark inputs: random, never zeros (a kernel can run faster on zeros than on real data).

/// `len` values uniform in [-1, 1) from a fixed-seed xorshift, repeating with a period of 2^22
/// elements (the values do not change the speed of the kernels measured; the period keeps
/// generation fast for gigabyte-sized inputs).
pub fn uniform(len: usize, seed: u64) -> Vec<f32> {
    const PERIOD: usize = 1 << 22;
    let mut state = seed | 1;
    let block: Vec<f32> = (0..PERIOD.min(len))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    block.iter().copied().cycle().take(len).collect()
}

/// A storage type benchmark inputs are made of.
pub trait Value: Copy {
    /// `x` rounded to nearest-even.
    fn from_f32(x: f32) -> Self;
}

impl Value for f32 {
    fn from_f32(x: f32) -> Self {
        x
    }
}

impl Value for half::bf16 {
    fn from_f32(x: f32) -> Self {
        half::bf16::from_f32(x)
    }
}

impl Value for half::f16 {
    fn from_f32(x: f32) -> Self {
        half::f16::from_f32(x)
    }
}

/// [`uniform`] values rounded to `T`.
pub fn random<T: Value>(len: usize, seed: u64) -> Vec<T> {
    uniform(len, seed).into_iter().map(T::from_f32).collect()
}
