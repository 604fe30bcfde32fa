//! Errors of the host runtime.

use cudarc::driver::DriverError;

/// For the errors a kernel fault leaves in the context (reported by the next driver call,
/// whichever it is, and by every call after it): where to look instead.
fn asynchronous_fault_note(err: &DriverError) -> &'static str {
    use cudarc::driver::sys::CUresult as R;
    match err.0 {
        R::CUDA_ERROR_ILLEGAL_ADDRESS
        | R::CUDA_ERROR_MISALIGNED_ADDRESS
        | R::CUDA_ERROR_ILLEGAL_INSTRUCTION
        | R::CUDA_ERROR_INVALID_ADDRESS_SPACE
        | R::CUDA_ERROR_INVALID_PC
        | R::CUDA_ERROR_HARDWARE_STACK_ERROR
        | R::CUDA_ERROR_LAUNCH_FAILED
        | R::CUDA_ERROR_LAUNCH_TIMEOUT
        | R::CUDA_ERROR_ASSERT => {
            " (a kernel fault, reported at the first driver call after it: it may come from an \
             earlier kernel; CUDA_LAUNCH_BLOCKING=1 makes every launch report its own, and \
             compute-sanitizer names the access)"
        }
        _ => "",
    }
}

/// Result of host-runtime operations.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;

/// Everything that can go wrong between the host and a device.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// The CUDA driver library is not installed or cannot be initialised.
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    /// The driver works but sees no GPU.
    #[error("no CUDA device found")]
    NoDevice,
    /// The GPU is older than the oldest architecture the kernels are built for.
    #[error("GPU {name} has compute capability {major}.{minor}; the kernels need 8.0 or newer")]
    UnsupportedArch {
        /// Device name.
        name: String,
        /// Compute capability, major.
        major: i32,
        /// Compute capability, minor.
        minor: i32,
    },
    /// The PTX for this GPU was not built when this binary was.
    #[error("PTX for {arch} not built: run `cargo xtask build-ptx`, then rebuild")]
    PtxNotBuilt {
        /// The architecture whose module is missing (`sm_80`, `sm_90a`).
        arch: &'static str,
    },
    /// A build that reads its PTX from a file at run time (the GPU bundle's) could not.
    #[error("the {arch} PTX of this build is read from a file: {reason}")]
    PtxFile {
        /// The architecture of the module.
        arch: &'static str,
        /// What is missing or wrong.
        reason: String,
    },
    /// The driver rejected the PTX module.
    #[error("loading the {arch} PTX module failed: {source}{hint}")]
    PtxLoad {
        /// The architecture of the module.
        arch: &'static str,
        /// Driver error.
        source: DriverError,
        /// What to do about it, when known (starts with a separator, or is empty).
        hint: &'static str,
    },
    /// A kernel named by kernel-abi is not in the loaded module.
    #[error("kernel `{name}` is not in the PTX module (stale PTX? run `cargo xtask build-ptx`)")]
    MissingKernel {
        /// Entry name.
        name: &'static str,
    },
    /// A device allocation failed for lack of memory.
    #[error("out of GPU memory allocating {bytes} bytes ({free} bytes free of {total})")]
    OutOfMemory {
        /// Requested size.
        bytes: usize,
        /// Free device memory at the time, as reported by the driver.
        free: usize,
        /// Total device memory.
        total: usize,
    },
    /// A launcher or copy was given arguments that do not fit together.
    #[error("{op}: invalid `{arg}`: {reason}")]
    InvalidArgument {
        /// Operation (kernel or copy) that rejected the arguments.
        op: &'static str,
        /// The offending argument.
        arg: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Any other driver error, with the operation that produced it (and, for a kernel fault
    /// the driver reports later, at whatever call comes next, a note saying so).
    #[error("{op}: {source}{}", asynchronous_fault_note(source))]
    Driver {
        /// What was being done.
        op: &'static str,
        /// Driver error.
        source: DriverError,
    },
    /// The PTX simulator stopped a kernel: a fault a GPU would not report precisely (an
    /// out-of-bounds access, a shared-memory race, ...) or PTX it cannot run. `detail` names
    /// the kernel, block, thread, PTX line and instruction, and the address involved.
    #[error("ptx-sim: {kind}: {detail}")]
    Sim {
        /// What went wrong.
        kind: SimErrorKind,
        /// Where and how, in words.
        detail: String,
    },
}

/// The kinds of [`GpuError::Sim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimErrorKind {
    /// A load or store outside every allocation, outside the block's shared memory, or
    /// outside the parameter or local space.
    OutOfBounds,
    /// An access whose address is not a multiple of its size.
    Misaligned,
    /// Two threads touched the same shared-memory bytes, at least one writing, with no
    /// barrier between them.
    SharedRace,
    /// Shared-memory bytes accessed while a `cp.async` into them is still in flight (a missing
    /// or too late `cp.async.wait_group`).
    AsyncCopyHazard,
    /// A read of shared-memory bytes that no thread of the block has written.
    UninitializedShared,
    /// A rule of Hopper's asynchronous operations was broken: generic-proxy shared writes
    /// read or overwritten by TMA / wgmma without `fence.proxy.async`, a wgmma accumulator or
    /// operand touched while in flight, a `wgmma.mma_async` without the `wgmma.fence` its
    /// registers need, or an mbarrier misused (not initialised, arrived on too often,
    /// transaction count out of range).
    AsyncProxyHazard,
    /// A warp-collective or barrier rule of the PTX ISA was broken: lanes of an `.aligned`
    /// instruction at different instructions, a member mask naming an exited lane or a lane
    /// that never arrives, the warps of a warpgroup not issuing the same `wgmma.*` /
    /// `setmaxnreg` instructions together.
    IllegalCollective,
    /// Every live thread of a block waits and none can proceed.
    Deadlock,
    /// The kernel executed `trap`.
    Trap,
    /// An integer division by zero (the result is unspecified in PTX).
    DivisionByZero,
    /// PTX the simulator does not parse or an instruction or modifier it does not implement.
    Unsupported,
}

impl std::fmt::Display for SimErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SimErrorKind::OutOfBounds => "out-of-bounds access",
            SimErrorKind::Misaligned => "misaligned access",
            SimErrorKind::SharedRace => "shared-memory race",
            SimErrorKind::AsyncCopyHazard => "cp.async hazard",
            SimErrorKind::UninitializedShared => "uninitialized shared-memory read",
            SimErrorKind::AsyncProxyHazard => "async-proxy hazard",
            SimErrorKind::IllegalCollective => "illegal collective",
            SimErrorKind::Deadlock => "deadlock",
            SimErrorKind::Trap => "trap",
            SimErrorKind::DivisionByZero => "integer division by zero",
            SimErrorKind::Unsupported => "unsupported PTX",
        })
    }
}

impl GpuError {
    /// Shorthand for [`GpuError::InvalidArgument`].
    pub fn invalid(op: &'static str, arg: &'static str, reason: impl Into<String>) -> Self {
        GpuError::InvalidArgument { op, arg, reason: reason.into() }
    }

    /// Whether the error means "there is no usable GPU here" (no driver or no device), as
    /// opposed to a GPU that is present but failed.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, GpuError::NoDriver(_) | GpuError::NoDevice)
    }
}

/// Attaches the operation name to a driver error.
pub(crate) trait DriverContext<T> {
    fn during(self, op: &'static str) -> Result<T>;
}

impl<T> DriverContext<T> for std::result::Result<T, DriverError> {
    fn during(self, op: &'static str) -> Result<T> {
        self.map_err(|source| GpuError::Driver { op, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::CUresult;

    /// A kernel fault reported by a later call says where to look; other errors say nothing
    /// more than the driver. (Displaying a `DriverError` needs the driver's error strings,
    /// so the note is checked on its own.)
    #[test]
    fn kernel_faults_point_at_earlier_kernels() {
        let note = |code| asynchronous_fault_note(&DriverError(code));
        assert!(
            note(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS).contains("may come from an earlier kernel")
        );
        assert!(note(CUresult::CUDA_ERROR_LAUNCH_FAILED).contains("CUDA_LAUNCH_BLOCKING=1"));
        assert_eq!(note(CUresult::CUDA_ERROR_INVALID_VALUE), "");
    }
}
