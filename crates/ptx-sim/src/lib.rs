//! A PTX interpreter: runs the exact PTX that `cargo xtask build-ptx` produced on the CPU, so
//! every kernel is tested on every machine, CI included (the role Triton's interpreter mode
//! plays for Triton). It is test infrastructure: fidelity and diagnostics come first, but the
//! whole kernel suite must still run in CI in a few minutes.
//!
//! [`Simulator`] implements [`gpu_host::Device`], so the launchers of `gpu_host::kernels` and
//! the generic kernel tests run on it unchanged:
//!
//! ```no_run
//! use gpu_host::{Device, DeviceBuffer, kernels::elementwise::add};
//! # fn main() -> gpu_host::Result<()> {
//! let sim = ptx_sim::Simulator::new()?; // the sm_80 module gpu-host embedded at build time
//! let (a, b) = (sim.upload(&[1.0f32; 1000])?, sim.upload(&[2.0f32; 1000])?);
//! let mut out = sim.alloc::<f32>(1000)?;
//! add(&sim, a.view(), b.view(), out.view_mut())?; // runs the PTX of `add_f32`
//! assert_eq!(sim.download(out.view())?, vec![3.0; 1000]);
//! # Ok(()) }
//! ```
//!
//! # Pipeline
//! - `parse`: a parser for the PTX LLVM's NVPTX back end emits (directives, `.entry`/`.func`,
//!   `.reg`/`.shared`/`.local` declarations, scoped `{ }` blocks of inline asm, labels,
//!   guards, vector and address operands, `_` sinks). It is under 900 lines written for this
//!   subset, instead of the `ptx-syntax` crate (which parses the same PTX but is ~120k lines of
//!   generated code: a large compile-time cost in CI for a grammar we need a small part of),
//!   and it keeps exact source lines for messages.
//! - `decode`: every instruction becomes a compact `Op` with register names resolved to slots,
//!   labels to instruction indices and symbols (parameters, shared and local variables) to
//!   addresses. Every opcode, modifier and operand form is checked here: an instruction or
//!   modifier the simulator does not implement is an error naming the kernel, PTX line and
//!   instruction — never skipped. A kernel that does not decode fails when launched; other
//!   kernels stay usable ([`Simulator::check_kernels`] lists all failures).
//! - `exec`: runs a launch; `racecheck` holds the shared-memory shadow state; `memory` the
//!   global heap and the generic address map.
//!
//! # Execution model
//! - Blocks run in parallel on the rayon pool ([`SimOptions::parallel_blocks`]); within a
//!   block, warps run one at a time until they wait at a barrier or exit.
//! - Each lane has its own program counter. The ready lanes with the lowest program counter
//!   execute the next instruction together; divergent lanes therefore reconverge where their
//!   paths meet, and lanes leaving a loop early wait past it for the others.
//! - Warp collectives (`shfl.sync`, `vote.sync`, `redux.sync`, `bar.warp.sync`, and the
//!   `.aligned` `mma.sync` and `ldmatrix`) execute once every lane named by the member mask
//!   (all 32 for `.aligned`) waits at that same instruction. Errors: a mask naming an exited
//!   lane or a lane past the end of a partial warp, lanes disagreeing on the mask, an executing
//!   lane outside its mask, a `shfl` source lane outside the mask (its value is undefined), and
//!   lanes that can never arrive (e.g. an `.aligned` instruction in divergent code, or two
//!   different `mma` instructions). Stricter than sm_70+ hardware in one respect: lanes of a
//!   non-`.aligned` collective must meet at the same instruction (the CUDA programming rule).
//! - `bar.sync`/`barrier.sync` complete when every live thread of the block waits at a barrier
//!   (exited threads do not count); lanes of one warp must wait at the same `bar.sync` or
//!   `barrier.sync.aligned` (`barrier.sync` without `.aligned` may differ); threads waiting at
//!   different barrier numbers are a deadlock. A thread count other than the block size is not
//!   supported.
//! - `activemask` returns the lanes the simulator executes together, which need not match a
//!   GPU's convergence after divergent code.
//! - Kernels run synchronously inside `launch`, which returns the first fault of the
//!   lowest-numbered failing block; `synchronize` has nothing left to report. A launch is
//!   refused, as a GPU refuses it, when its parameter bytes differ from the entry's, its
//!   block exceeds the entry's `.maxntid` or differs from its `.reqntid`, or its shared
//!   memory exceeds the limit below.
//!
//! # Memory model
//! - Global memory: allocations from `0x7f00_0000_0000` up, 256-byte aligned, with a guard gap
//!   of at least 4 KiB after each and addresses never reused, so an off-by-one access or a use
//!   after free is out of bounds, not a silent hit in a neighbour. Fresh allocations are filled
//!   with `0xff` bytes (NaN / -1).
//! - Shared memory per block: static `.shared` variables from shared address `0x400` (as on
//!   Hopper, which reserves the first KiB, so an address computed without its base is out of
//!   bounds), then the dynamic `.extern .shared` part, 16-byte aligned. At most 227 KiB
//!   ([`MAX_SHARED_PER_BLOCK`]).
//! - Generic addresses: `cvta` maps shared, local and parameter addresses into fixed 4 GiB
//!   windows (`0x7e00_0000_0000`, `0x7d…`, `0x7c…`); global addresses are their own generic
//!   addresses. `ld`/`st`/`atom` without a state space resolve through these windows.
//! - Every access is bounds-checked (global: inside one live allocation; shared: inside the
//!   block's; parameter and local spaces likewise) and must be aligned to its size (a `.v4.u32`
//!   to 16 bytes).
//! - Accesses of one launch are sequentially consistent within a block; blocks running in
//!   parallel see each other's global writes in no particular order (as on a GPU). Fences are
//!   sequentially consistent fences; memory-order and cache qualifiers have no further effect.
//!   `ld.global.nc` is coherent. Atomics are atomic across blocks.
//! - `cp.async` is a deferred copy: the source is read at issue, the destination written when
//!   the issuing thread's `cp.async.wait_group`/`wait_all` completes its group (or when it
//!   exits). Until then the destination keeps its old contents, so a missing or too-early wait
//!   reads stale data. A copy with `src-size` between 1 and its size reads only `src-size`
//!   bytes (the rest of the destination is zero), but its whole window must lie inside an
//!   allocation, as compute-sanitizer's memcheck requires (it counts the window as read).
//!
//! # Hopper (sm_90a) asynchronous instructions
//! - `mbarrier` (`init`, `arrive`, `arrive.expect_tx`, `expect_tx`, `try_wait.parity` /
//!   `test_wait.parity`, CTA scope): a side table per block keyed by shared address. A phase
//!   completes when its pending arrivals and its transaction count reach 0. A lane whose wait
//!   fails is descheduled and retried after the other warps ran; when no thread can make
//!   progress the launch fails with a deadlock naming every barrier's state.
//! - `cp.async.bulk.tensor.2d` / `.3d` global → shared (TMA tile loads) with
//!   `mbarrier::complete_tx::bytes`: the tensor map is read from global memory in the
//!   simulator's own encoding (`Device::tensor_map`; rank 3 is a batch of matrices, a box
//!   takes one, and the instruction's dimensionality must be the map's rank), the box lands
//!   at once (elements outside the tensor are zero) in the map's 32/64/128-byte swizzle, and
//!   completes its bytes on the barrier. The issuing thread must have acquired the map with
//!   `fence.proxy.tensormap::generic.acquire.sys` (the host wrote it); the box's inner
//!   coordinate times the element size must be a multiple of 16 bytes (`Misaligned`
//!   otherwise: an H200 raised an illegal instruction for a bf16 box at 60); a swizzled box must
//!   start on its pattern's repeat (1024 bytes for the 128-byte swizzle) and have rows exactly
//!   as wide as the swizzle span (narrower rows are legal on the hardware, which places them
//!   in a way the ISA does not write down: refused as `Unsupported`).
//! - `wgmma.mma_async` (m64nNk16 bf16/f16, m64nNk8 tf32, f32 accumulators, A from a
//!   descriptor or registers, B from a descriptor, K-major or (bf16/f16, `imm-trans` 1)
//!   M/N-major, all swizzle modes and the interleaved layout; a swizzled descriptor must start
//!   in the first 128-byte row of its pattern, as the k-steps of CUTLASS do, else `Unsupported`),
//!   executed per warp (each warp owns 16 of the 64 rows) with the numerics of `mma.sync`;
//!   results reach the registers at the `wgmma.wait_group` that retires their group.
//!   `wgmma.fence`, `commit_group`, `wait_group`.
//! - `fence.proxy.async`, `elect.sync`, `setmaxnreg` (checked and otherwise a no-op: the
//!   simulator has no register file limit).
//! - `griddepcontrol.wait` and `.launch_dependents` (programmatic dependent launch): no-ops,
//!   since the simulator runs a stream's launches one after another.
//! - The four warps of a warpgroup (warps 4g .. 4g + 3) must issue the same `wgmma.*` and
//!   `setmaxnreg` instructions in the same order, and all of them (kind `IllegalCollective`:
//!   a warp at another instruction, one that skipped some, a block without the whole
//!   warpgroup).
//!
//! Their rules are checked (errors of kind `AsyncProxyHazard` unless noted): an access to a
//! wgmma's accumulators or A registers before the `wait_group` retiring it; a wgmma whose
//! registers other instructions wrote, without `wgmma.fence` since the last commit; shared
//! bytes written (by threads or TMA) while an in-flight wgmma reads them; TMA or wgmma
//! touching bytes a thread wrote through the generic proxy without a `fence.proxy.async`
//! since; an uninitialised mbarrier, a transaction count beyond ±(2^20-1), an arrival beyond
//! the expected count while the phase still waits for its bytes. Ordering through
//! mbarriers is part of the race check: each thread has a vector clock; arrivals and TMA
//! completions release into the phase, a successful wait acquires it, so a consumer reading
//! a stage before its phase completed, or a producer overwriting a stage before the consumers
//! released it, is a race (kind `SharedRace`) even when the simulator's schedule happened to
//! order the two.
//!
//! # Checks a GPU does not give you
//! With [`SimOptions`] all on (the default):
//! - out-of-bounds and misaligned accesses, in any space, naming the allocation and how far
//!   outside it the access is;
//! - shared-memory races (racecheck): per byte, two accesses from different threads, at
//!   least one a write, not both atomic, in the same interval between block barriers (and,
//!   for two lanes of one warp, between `bar.warp.sync`s). Intervals, not the simulator's own
//!   thread order, decide, so races are found whatever order the simulator ran threads in.
//!   Both accesses are named;
//! - `cp.async` hazards: any access to shared bytes with a copy still in flight;
//! - reads of shared bytes no thread of the block has written;
//! - integer division by zero, `trap`, illegal collectives, barrier deadlocks.
//!
//! # Numerics
//! - Integer ops wrap (or saturate with `.sat`); shift amounts clamp to the width.
//! - `add`/`sub`/`mul`/`fma`/`mad.rn`/`div.rn`/`sqrt.rn`/`rcp.rn` are IEEE round-to-nearest-even
//!   in f32/f64 (other rounding modifiers are rejected). `add`/`mul` without a rounding
//!   modifier are rounded the same way (ptxas may contract those into an `fma` on a GPU; LLVM
//!   always writes `.rn`). `.ftz` flushes subnormal inputs and results; `.sat` clamps to
//!   [0, 1]. Every NaN an arithmetic instruction produces is the canonical `0x7fffffff`,
//!   f32 `abs`/`neg` of a NaN included (ptxas makes them `FADD`s; an H100 agrees); otherwise
//!   `abs`/`neg`/`copysign` only touch the sign bit. `min`/`max` return the non-NaN operand
//!   and order -0 below +0 (`.NaN` variants return NaN).
//! - `.approx` functions (`ex2`, `lg2`, `rcp`, `sqrt`, `rsqrt`, `tanh`, `sin`, `cos`,
//!   `div.approx`, `div.full`) are computed in f64 and rounded to f32: within 1 ulp of exact,
//!   tighter than the hardware bounds (e.g. `tanh.approx` has a relative error up to 2^-11 on
//!   a GPU), so kernel tests of such code need a tolerance against the CPU reference.
//! - `cvt`: every rounding mode for float → integer (saturating, NaN → 0), integer → f32/f64
//!   (`.rn/.rz/.rm/.rp`), f64 → f32 (`.rn/.rz/.rm/.rp`), `.rn` from f32 to f16/bf16 and the
//!   packed `.f16x2/.bf16x2` forms (with `.relu`/`.satfinite`), `.rna[.satfinite]` to tf32,
//!   integral rounding `.rni/.rzi/.rmi/.rpi`, `.ftz`, `.sat`. NaN results are canonical, except
//!   tf32's, which keep the input's upper 19 bits (ptxas's integer code for `cvt.rna`). `.relu`
//!   turns -0 into +0.
//! - `mma.sync` (m16n8k16 bf16/f16 and m16n8k8 tf32, `.row.col`, f32 accumulators): products
//!   are exact in f64, the k products and the accumulator are summed in f64 and rounded once
//!   to f32; tf32 operands use only the upper 19 bits of their registers. The hardware's
//!   accumulation order and internal precision differ by a few ulps at most.
//!
//! # Memory-access profile
//! [`Simulator::start_memory_profile`] / [`Simulator::take_memory_profile`] count each load,
//! store, `cp.async` and `ldmatrix` per warp-level request as Nsight Compute does: global
//! sectors against the bytes asked for, shared-memory wavefronts against the ideal
//! ([`profile`]). `trainer bench --device sim --memory-profile` reports them per kernel.
//!
//! # Not modelled
//! Function calls (`call`; device functions must be inlined, as the project's are), module
//! `.global`/`.const` variables, textures and surfaces, clusters (and the cluster forms of
//! mbarriers and TMA), TMA stores, multicast, 1/3/4/5-D and im2col tensor copies,
//! non-tensor `cp.async.bulk`, sparse and integer/fp8 wgmma, descriptor base offsets other than 0
//! (and so descriptors starting past the first row of their swizzle pattern), swizzled TMA
//! boxes narrower than the swizzle span, the tensor cores' internal accumulation (the
//! simulator sums exact products in f64, more accurately than the hardware), timing of asynchronous copies
//! (they complete at issue), half-precision arithmetic instructions (`add.f16` ...), other `mma` shapes and
//! types, `bar.arrive`/`bar.red` and partial-block barriers, `.rz/.rm/.rp` on float
//! arithmetic, global-memory races (only shared memory is race-checked), cache behaviour and
//! timing (`%clock` counts a warp's issued instructions). Kernels that spin-wait on another
//! block (inter-block locks) may hang: blocks are not guaranteed to run concurrently.
//!
//! # Errors
//! Faults are [`gpu_host::GpuError::Sim`] with a [`gpu_host::SimErrorKind`] and one line of
//! detail, e.g.
//!
//! ```text
//! ptx-sim: shared-memory race: read-after-write race on shared byte 0x404: this thread reads
//! it, thread (1,0,0) wrote it at PTX line 23 `st.shared.u32 [%r3], %r0;`, and no barrier
//! orders the two — in kernel `k`, block (0,0,0), thread (0,0,0) (warp 0, lane 0), at PTX
//! line 28: `ld.shared.u32 %r9, [%r4];`
//! ```
//!
//! # Speed
//! Instructions are pre-decoded; a warp's converged lanes execute each instruction in one
//! dispatch. On 2 cores: about 200 M lane-instructions/s for ALU and global-memory code, and
//! about 17 M 16-byte shared-memory accesses/s with every shared-memory check on.

mod decode;
mod device;
mod exec;
mod memory;
mod parse;
pub mod profile;
mod racecheck;
mod tensor_map;

pub use device::{MAX_SHARED_PER_BLOCK, SimBuffer, SimOptions, Simulator};
