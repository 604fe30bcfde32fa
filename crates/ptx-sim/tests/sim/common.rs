//! Helpers for tests that run hand-written PTX on the simulator.

use gpu_host::{Device, DeviceBuffer, GpuError, LaunchConfig, SimErrorKind};
use ptx_sim::{SimOptions, Simulator};

/// A module with one kernel `k(.u64 out, .u64 in)` whose body is `body`, with registers
/// declared: `%p<16>`, `%rs<16>` (b16), `%r<64>` (b32), `%rd<32>` (b64), `%f<32>` (f32),
/// `%fd<16>` (f64). On entry `%rd0` = out, `%rd1` = in, `%r0` = `%tid.x`, `%r60` = `%laneid`;
/// `smem` is the dynamic shared memory.
pub fn kernel(body: &str) -> String {
    format!(
        ".version 7.8\n.target sm_80\n.address_size 64\n\
         .extern .shared .align 16 .b8 smem[];\n\
         .visible .entry k(\n\t.param .u64 k_out,\n\t.param .u64 k_in\n)\n{{\n\
         \t.reg .pred %p<16>;\n\t.reg .b16 %rs<16>;\n\t.reg .b32 %r<64>;\n\t.reg .b64 %rd<32>;\n\
         \t.reg .f32 %f<32>;\n\t.reg .f64 %fd<16>;\n\
         \tld.param.u64 %rd0, [k_out];\n\tld.param.u64 %rd1, [k_in];\n\
         \tmov.u32 %r0, %tid.x;\n\tmov.u32 %r60, %laneid;\n\
         {body}\n\tret;\n}}\n"
    )
}

/// Line in [`kernel`]'s text where `body` starts.
pub const BODY_LINE: u32 = 20;

/// Runs [`kernel`]`(body)` with `input` in `in` and `out_words` words of `out` (filled with
/// `0xffffffff` first); returns `out` afterwards.
pub fn run_on(
    sim: &Simulator,
    config: LaunchConfig,
    input: &[u32],
    out_words: usize,
) -> Result<Vec<u32>, GpuError> {
    let input = sim.upload(if input.is_empty() { &[0u32] } else { input })?;
    let mut out = sim.upload(&vec![u32::MAX; out_words])?;
    let mut params = out.view_mut().addr().to_le_bytes().to_vec();
    params.extend_from_slice(&input.view().addr().to_le_bytes());
    sim.launch_bytes("k", config, &params)?;
    sim.download(out.view())
}

/// [`run_on`] with a fresh simulator of `body`.
pub fn run(
    body: &str,
    config: LaunchConfig,
    input: &[u32],
    out_words: usize,
) -> Result<Vec<u32>, GpuError> {
    run_with(body, SimOptions::default(), config, input, out_words)
}

/// [`run`] with options.
pub fn run_with(
    body: &str,
    options: SimOptions,
    config: LaunchConfig,
    input: &[u32],
    out_words: usize,
) -> Result<Vec<u32>, GpuError> {
    let sim = Simulator::from_ptx(&kernel(body))?.with_options(options);
    run_on(&sim, config, input, out_words)
}

/// One thread, no input: the first `out_words` words it stores.
pub fn run1(body: &str, out_words: usize) -> Vec<u32> {
    run(body, LaunchConfig::linear(1, 1), &[], out_words).unwrap_or_else(|e| panic!("{e}"))
}

/// `threads` threads in one block.
pub fn block(threads: u32) -> LaunchConfig {
    LaunchConfig::linear(1, threads)
}

/// Fails unless `result` is a simulator error of `kind` whose message contains every needle.
pub fn expect_err<T: std::fmt::Debug>(
    result: Result<T, GpuError>,
    kind: SimErrorKind,
    needles: &[&str],
) -> String {
    match result {
        Err(GpuError::Sim { kind: k, detail }) if k == kind => {
            for needle in needles {
                assert!(detail.contains(needle), "message lacks {needle:?}:\n{detail}");
            }
            detail
        }
        other => panic!("expected a {kind:?} error, got {other:?}"),
    }
}

/// f32 bits.
pub fn f(x: f32) -> u32 {
    x.to_bits()
}
