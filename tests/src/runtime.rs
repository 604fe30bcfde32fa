//! The runtimes kernel tests run on, and their random inputs.

use gpu_host::{Device, DeviceBuffer, DeviceElement, Gpu, GpuError};
use ptx_sim::Simulator;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
use std::io::Write;
use std::sync::OnceLock;

/// The CUDA GPU shared by all tests of this process, or `None` (after printing one
/// `skipped: no GPU (reason)` line) when the machine has no driver or no device.
///
/// # Panics
/// When a GPU is present but unusable (PTX not built or not loadable): that is a failure,
/// not a reason to skip.
pub fn gpu() -> Option<&'static Gpu> {
    static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();
    let gpu = GPU.get_or_init(|| match Gpu::new() {
        Ok(gpu) => {
            note(&format!("kernel tests on {}", gpu.describe()));
            Ok(gpu)
        }
        Err(e) if e.is_unavailable() => {
            note(&format!("skipped: no GPU ({e})"));
            Err(e.to_string())
        }
        Err(e) => panic!("a GPU is present but unusable: {e}"),
    });
    gpu.as_ref().ok()
}

/// The PTX simulator of the project's sm_80 module, shared by all tests of this process.
///
/// # Panics
/// When the PTX was not built (`cargo xtask build-ptx`) or does not parse: the simulator
/// tests run on every machine, so missing PTX is a failure, not a reason to skip.
pub fn sim() -> &'static Simulator {
    static SIM: OnceLock<Simulator> = OnceLock::new();
    shared_sim(&SIM, Simulator::new, "sm_80")
}

/// The PTX simulator of the project's sm_90a module (the Hopper kernels), shared by all tests
/// of this process.
///
/// # Panics
/// As [`sim`].
pub fn hopper_sim() -> &'static Simulator {
    static SIM: OnceLock<Simulator> = OnceLock::new();
    shared_sim(&SIM, Simulator::hopper, "sm_90a")
}

/// The simulator in `cell`, loaded by `load` on first use; panics naming the `module`.
fn shared_sim(
    cell: &'static OnceLock<Simulator>,
    load: fn() -> gpu_host::Result<Simulator>,
    module: &str,
) -> &'static Simulator {
    cell.get_or_init(|| match load() {
        Ok(sim) => sim,
        Err(e) => panic!("the PTX simulator cannot load the project's {module} PTX: {e}"),
    })
}

/// Writes one line to stderr, bypassing the test harness's output capture (once per
/// process, since callers hold a `OnceLock`).
fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Whether a kernel test should use its small sizes: always on the simulator (too slow for
/// the full ones), and on a GPU when `KERNEL_TESTS_SMALL` is set (the GPU bundle's sanitizer
/// stage, whose tools slow kernels down by orders of magnitude). The small sizes keep every
/// edge case; only the GPT-2-sized runs are dropped.
pub fn small_sizes(dev: &impl Device) -> bool {
    dev.is_simulator() || std::env::var_os("KERNEL_TESTS_SMALL").is_some()
}

/// How many values of [`TestRng::uniform`] one generator draws.
pub const UNIFORM_CHUNK: usize = 1 << 16;

/// A seeded random source for test inputs: the seed comes from `TEST_SEED` or is fresh, and
/// is part of every failure message.
pub struct TestRng {
    rng: StdRng,
    seed: u64,
}

impl TestRng {
    /// A new source (seed from `TEST_SEED`, else random).
    pub fn new() -> Self {
        let seed = std::env::var("TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random::<u64>);
        Self::with_seed(seed)
    }

    /// A source with a fixed seed (to give two runtimes the same inputs).
    pub fn with_seed(seed: u64) -> Self {
        Self { rng: StdRng::seed_from_u64(seed), seed }
    }

    /// Two sources in the same state, seeded from this one (to give two launches the same
    /// inputs); their failure messages name this source's seed, which reproduces them.
    pub fn twins(&mut self) -> (Self, Self) {
        let state: u64 = self.rng.random();
        let twin = || Self { rng: StdRng::seed_from_u64(state), seed: self.seed };
        (twin(), twin())
    }

    /// The seed (rerun with `TEST_SEED=<seed>` to reproduce).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// `n` values uniform in `[lo, hi)`. Drawn in parallel, in chunks of [`UNIFORM_CHUNK`]
    /// values each from its own generator, seeded from this one: the same values for the same
    /// seed on any number of threads (the GPT-2-sized inputs of the GPU runs are ~10⁹ values).
    pub fn uniform(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        let base: u64 = self.rng.random();
        let mut values = vec![0.0; n];
        values.par_chunks_mut(UNIFORM_CHUNK).enumerate().for_each(|(i, chunk)| {
            let mut rng = StdRng::seed_from_u64(base.wrapping_add(i as u64));
            chunk.iter_mut().for_each(|x| *x = rng.random_range(lo..hi));
        });
        values
    }

    /// `n` random u16 values.
    pub fn u16s(&mut self, n: usize) -> Vec<u16> {
        (0..n).map(|_| self.rng.random()).collect()
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.rng.random()).collect()
    }

    /// A value uniform in `[lo, hi)`.
    pub fn scalar(&mut self, lo: f32, hi: f32) -> f32 {
        self.rng.random_range(lo..hi)
    }
}

impl Default for TestRng {
    fn default() -> Self {
        Self::new()
    }
}

/// Uploads `len` elements with every bit set (NaN for the float types), so an element the
/// kernel fails to write shows up.
pub fn poisoned<D: Device, T: DeviceElement>(
    dev: &D,
    len: usize,
) -> Result<D::Buffer<T>, GpuError> {
    let mut poison = T::zeroed();
    bytemuck::bytes_of_mut(&mut poison).fill(0xff);
    dev.upload(&vec![poison; len])
}

/// `data` on the device, `offset` elements into an allocation whose other elements are
/// poisoned: `offset` not a multiple of 16 bytes takes the buffer off the 16-byte alignment
/// that the kernels' vector paths need. View it with `.slice(offset..offset + data.len())`.
pub fn upload_at<D: Device, T: DeviceElement>(
    dev: &D,
    data: &[T],
    offset: usize,
) -> Result<D::Buffer<T>, GpuError> {
    let mut buf = poisoned(dev, offset + data.len())?;
    dev.copy_to_device(data, buf.view_mut().slice_mut(offset..offset + data.len())?)?;
    Ok(buf)
}

/// Element offsets for the `N` buffers of a kernel with a 16-byte vector path, for
/// [`upload_at`]: all aligned, all one element off, and each buffer one element off alone,
/// so that the vector path's alignment test of every pointer is needed.
pub fn alignment_cases<const N: usize>() -> Vec<[usize; N]> {
    let mut cases = vec![[0; N], [1; N]];
    cases.extend((0..N).map(|k| std::array::from_fn(|i| usize::from(i == k))));
    cases
}
