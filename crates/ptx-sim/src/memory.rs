//! Device memory: the global heap, and the address map of the generic address space.
//!
//! Global allocations get addresses from [`GLOBAL_BASE`] upward, 256-byte aligned, with a
//! guard gap of at least [`GUARD_BYTES`] between allocations and never reused, so an
//! off-by-one access or a use after free is out of bounds instead of landing in a neighbour.
//!
//! Generic addresses map to the shared, local and parameter spaces through fixed 4 GiB
//! windows ([`SHARED_WINDOW`], ...); everything else is a global address. Shared addresses
//! start at [`SHARED_BASE`] (as on Hopper, which reserves the first KiB), so a shared address
//! computed without its base is out of bounds.
//!
//! Bytes are `AtomicU8`s accessed with relaxed ordering: blocks run on several host threads
//! and may legitimately race on global memory (the model gives no guarantee about which write
//! wins, like a GPU), so every access must be a Rust atomic to stay sound.

use crate::decode::op::Space;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

/// First global address.
pub const GLOBAL_BASE: u64 = 0x7f00_0000_0000;
/// Alignment of every allocation (cudaMalloc gives at least 256).
pub const ALLOC_ALIGN: u64 = 256;
/// Minimum unmapped gap after each allocation.
pub const GUARD_BYTES: u64 = 4096;
/// Generic-address window of the shared space: generic = window + shared address.
pub const SHARED_WINDOW: u64 = 0x7e00_0000_0000;
/// Generic-address window of the local space.
pub const LOCAL_WINDOW: u64 = 0x7d00_0000_0000;
/// Generic-address window of the kernel-parameter space.
pub const PARAM_WINDOW: u64 = 0x7c00_0000_0000;
/// Size of each window.
pub const WINDOW_BYTES: u64 = 1 << 32;
/// First shared-memory address of a block.
pub const SHARED_BASE: u32 = 0x400;
/// Byte that fresh allocations are filled with (all-ones: NaN for floats, -1 for integers).
pub const FRESH_BYTE: u8 = 0xff;

/// One global allocation.
pub struct Allocation {
    /// Device address of the first byte.
    pub base: u64,
    /// Sequence number, for messages.
    pub id: u64,
    bytes: Box<[AtomicU8]>,
}

impl Allocation {
    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Copies `out.len()` bytes starting at `offset` (in bounds, checked by the caller).
    pub fn read(&self, offset: u64, out: &mut [u8]) {
        let src = &self.bytes[offset as usize..offset as usize + out.len()];
        for (o, b) in out.iter_mut().zip(src) {
            *o = b.load(Ordering::Relaxed);
        }
    }

    /// Writes `data` starting at `offset` (in bounds, checked by the caller).
    pub fn write(&self, offset: u64, data: &[u8]) {
        let dst = &self.bytes[offset as usize..offset as usize + data.len()];
        for (b, v) in dst.iter().zip(data) {
            b.store(*v, Ordering::Relaxed);
        }
    }

    fn describe(&self) -> String {
        format!(
            "allocation #{} [{:#x}, {:#x}) of {} bytes",
            self.id,
            self.base,
            self.base + self.len(),
            self.len()
        )
    }
}

/// The global heap of one simulator.
pub struct Heap {
    live: RwLock<BTreeMap<u64, Arc<Allocation>>>,
    next_addr: AtomicU64,
    next_id: AtomicU64,
}

impl Default for Heap {
    fn default() -> Self {
        Self {
            live: RwLock::new(BTreeMap::new()),
            next_addr: AtomicU64::new(GLOBAL_BASE),
            next_id: AtomicU64::new(1),
        }
    }
}

impl Heap {
    /// A new allocation of `bytes` bytes filled with [`FRESH_BYTE`].
    pub fn alloc(&self, bytes: u64) -> Arc<Allocation> {
        let span = (bytes + GUARD_BYTES).next_multiple_of(ALLOC_ALIGN);
        let base = self.next_addr.fetch_add(span, Ordering::Relaxed);
        let alloc = Arc::new(Allocation {
            base,
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            bytes: (0..bytes).map(|_| AtomicU8::new(FRESH_BYTE)).collect(),
        });
        self.live.write().unwrap_or_else(PoisonError::into_inner).insert(base, alloc.clone());
        alloc
    }

    /// How many allocations this heap has made (freed ones included).
    pub fn allocation_count(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed) - 1
    }

    /// Bytes held by the live allocations (guards excluded).
    pub fn live_bytes(&self) -> u64 {
        let live = self.live.read().unwrap_or_else(PoisonError::into_inner);
        live.values().map(|a| a.len()).sum()
    }

    /// Unmaps the allocation at `base` (its addresses are never handed out again).
    pub fn free(&self, base: u64) {
        self.live.write().unwrap_or_else(PoisonError::into_inner).remove(&base);
    }

    /// The live allocation holding `[addr, addr + len)` and the offset of `addr` in it (for
    /// host copies).
    pub fn find(&self, addr: u64, len: u64) -> Option<(Arc<Allocation>, u64)> {
        let live = self.live.read().unwrap_or_else(PoisonError::into_inner);
        let (_, a) = live.range(..=addr).next_back()?;
        let offset = addr - a.base;
        offset.checked_add(len).is_some_and(|end| end <= a.len()).then(|| (a.clone(), offset))
    }

    /// The live allocations, for one launch.
    pub fn snapshot(&self) -> GlobalMemory {
        let live = self.live.read().unwrap_or_else(PoisonError::into_inner);
        GlobalMemory {
            allocs: live.values().cloned().collect(),
            locks: (0..ATOMIC_STRIPES).map(|_| Mutex::new(())).collect(),
            handed_out: GLOBAL_BASE..self.next_addr.load(Ordering::Relaxed),
        }
    }
}

const ATOMIC_STRIPES: usize = 64;

/// The global memory as one launch sees it: the allocations live at launch time.
pub struct GlobalMemory {
    allocs: Vec<Arc<Allocation>>,
    locks: Vec<Mutex<()>>,
    /// Every address the heap has handed out so far (live, freed or guard gap).
    handed_out: std::ops::Range<u64>,
}

impl GlobalMemory {
    /// The allocation holding `[addr, addr + len)` and the offset of `addr` in it, or a
    /// description of why the range is out of bounds.
    pub fn locate(&self, addr: u64, len: u64) -> Result<(&Allocation, u64), String> {
        let i = self.allocs.partition_point(|a| a.base <= addr);
        if i > 0 {
            let a = &self.allocs[i - 1];
            let offset = addr - a.base;
            if offset.checked_add(len).is_some_and(|end| end <= a.len()) {
                return Ok((a, offset));
            }
        }
        Err(self.describe_miss(addr, len, i))
    }

    fn describe_miss(&self, addr: u64, len: u64, i: usize) -> String {
        let mut msg = format!("{len} bytes at {addr:#x}: ");
        let before = i.checked_sub(1).map(|j| &self.allocs[j]);
        let after = self.allocs.get(i);
        match (before, after) {
            (Some(a), _) if addr < a.base + a.len() => {
                let over = addr + len - (a.base + a.len());
                let _ = write!(msg, "runs {over} bytes past the end of {}", a.describe());
            }
            (Some(a), _) if addr - (a.base + a.len()) < GUARD_BYTES => {
                let past = addr - (a.base + a.len());
                let _ = write!(msg, "{past} bytes past the end of {}", a.describe());
            }
            (_, Some(b)) if b.base - addr <= GUARD_BYTES => {
                let _ = write!(msg, "{} bytes before the start of {}", b.base - addr, b.describe());
            }
            _ if self.handed_out.contains(&addr) => {
                msg.push_str("not in any live allocation (freed, or between allocations)")
            }
            _ => msg.push_str("not a device address of this simulator"),
        }
        msg
    }

    /// Reads `out.len()` bytes at `addr`.
    pub fn load(&self, addr: u64, out: &mut [u8]) -> Result<(), String> {
        let (a, offset) = self.locate(addr, out.len() as u64)?;
        a.read(offset, out);
        Ok(())
    }

    /// Writes `data` at `addr`.
    pub fn store(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        let (a, offset) = self.locate(addr, data.len() as u64)?;
        a.write(offset, data);
        Ok(())
    }

    /// Holds the lock that makes read-modify-writes at `addr` atomic with respect to each
    /// other (plain loads and stores do not take it: mixing them with atomics on the same
    /// address is a race on a GPU too).
    pub fn atomic_lock(&self, addr: u64) -> MutexGuard<'_, ()> {
        let stripe = (addr >> 3) as usize % ATOMIC_STRIPES;
        self.locks[stripe].lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Each non-generic space and the generic address of its address 0 (`cvta` adds or
/// subtracts it; global addresses are generic addresses).
pub const GENERIC_WINDOWS: [(Space, u64); 4] = [
    (Space::Global, 0),
    (Space::Shared, SHARED_WINDOW),
    (Space::Local, LOCAL_WINDOW),
    (Space::Param, PARAM_WINDOW),
];

/// Which space a generic address falls in, and the address within that space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generic {
    /// A global address.
    Global(u64),
    /// A shared address.
    Shared(u64),
    /// A local address.
    Local(u64),
    /// A kernel-parameter address.
    Param(u64),
}

impl Generic {
    /// The state space.
    pub fn space(self) -> Space {
        match self {
            Generic::Global(_) => Space::Global,
            Generic::Shared(_) => Space::Shared,
            Generic::Local(_) => Space::Local,
            Generic::Param(_) => Space::Param,
        }
    }
}

/// Resolves a generic address.
pub fn resolve_generic(addr: u64) -> Generic {
    let inside = |window: u64| (window..window + WINDOW_BYTES).contains(&addr);
    if inside(SHARED_WINDOW) {
        Generic::Shared(addr - SHARED_WINDOW)
    } else if inside(LOCAL_WINDOW) {
        Generic::Local(addr - LOCAL_WINDOW)
    } else if inside(PARAM_WINDOW) {
        Generic::Param(addr - PARAM_WINDOW)
    } else {
        Generic::Global(addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_guarded_and_never_reused() {
        let heap = Heap::default();
        let a = heap.alloc(10);
        let b = heap.alloc(300);
        assert_eq!(a.base, GLOBAL_BASE);
        assert_eq!(b.base % ALLOC_ALIGN, 0);
        assert!(b.base >= a.base + 10 + GUARD_BYTES);
        heap.free(a.base);
        let c = heap.alloc(10);
        assert!(c.base > b.base);
    }

    #[test]
    fn out_of_bounds_accesses_are_described() {
        let heap = Heap::default();
        let a = heap.alloc(16);
        let mem = heap.snapshot();
        let mut buf = [0u8; 4];
        mem.load(a.base + 12, &mut buf).unwrap();
        assert_eq!(buf, [FRESH_BYTE; 4]);
        let err = mem.load(a.base + 16, &mut buf).unwrap_err();
        assert!(err.contains("0 bytes past the end of allocation #1"), "{err}");
        let err = mem.store(a.base + 14, &buf).unwrap_err();
        assert!(err.contains("runs 2 bytes past the end"), "{err}");
        let err = mem.load(a.base - 4, &mut buf).unwrap_err();
        assert!(err.contains("4 bytes before the start"), "{err}");
        let err = mem.load(0x1000, &mut buf).unwrap_err();
        assert!(err.contains("not a device address"), "{err}");
    }

    #[test]
    fn generic_windows_resolve() {
        assert_eq!(resolve_generic(SHARED_WINDOW + 0x400), Generic::Shared(0x400));
        assert_eq!(resolve_generic(GLOBAL_BASE), Generic::Global(GLOBAL_BASE));
        assert_eq!(resolve_generic(PARAM_WINDOW + 8), Generic::Param(8));
    }
}
