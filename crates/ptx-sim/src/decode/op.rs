//! The decoded form of an instruction: operands resolved to register slots, immediates,
//! special registers and absolute addresses; modifiers resolved to small enums.

/// Index of a register in a lane's register file.
pub type Slot = u32;

/// A source operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    /// A register (its value is read with the width of the instruction's type).
    Reg(Slot),
    /// An immediate, already in the instruction's type (two's complement / float bits).
    Imm(u64),
    /// A special register.
    Special(Special),
}

/// Special registers (`%tid.x`, ...); the dimension is 0 = x, 1 = y, 2 = z.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    /// `%tid`
    Tid(u8),
    /// `%ntid`
    Ntid(u8),
    /// `%ctaid`
    Ctaid(u8),
    /// `%nctaid`
    Nctaid(u8),
    /// `%laneid`
    LaneId,
    /// `%warpid` (the warp's index in its block).
    WarpId,
    /// `%nwarpid` (warps per block).
    NWarpId,
    /// `%lanemask_eq` / `lt` / `le` / `gt` / `ge`.
    LaneMask(LaneMask),
    /// `%clock` / `%clock64`: a per-thread count of executed instructions.
    Clock,
    /// `%smid` (always 0).
    SmId,
    /// `%nsmid` (always 1).
    NSmId,
    /// `%dynamic_smem_size`.
    DynamicSmemSize,
    /// `%total_smem_size` (static + dynamic).
    TotalSmemSize,
}

/// Which `%lanemask_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneMask {
    /// `%lanemask_eq`
    Eq,
    /// `%lanemask_lt`
    Lt,
    /// `%lanemask_le`
    Le,
    /// `%lanemask_gt`
    Gt,
    /// `%lanemask_ge`
    Ge,
}

/// `@p` / `@!p`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guard {
    /// The predicate register.
    pub slot: Slot,
    /// `@!p`.
    pub negate: bool,
}

/// A state space of a memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// `.global`
    Global,
    /// `.shared` (`.shared::cta`)
    Shared,
    /// `.local`
    Local,
    /// `.param` (kernel parameters)
    Param,
    /// No space: a generic address.
    Generic,
}

impl Space {
    /// The PTX name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::Local => "local",
            Space::Param => "param",
            Space::Generic => "generic",
        }
    }
}

/// `[base + offset]`; symbols are already folded into `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addr {
    /// Base register, if any.
    pub base: Option<Slot>,
    /// Constant part (wrapping).
    pub offset: u64,
}

/// An integer type: width and signedness (`.b` types are unsigned; `.pred` is 1 bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntTy {
    /// 1, 8, 16, 32 or 64.
    pub bits: u8,
    /// `.s` type.
    pub signed: bool,
}

/// A floating-point arithmetic type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FTy {
    /// `.f32`
    F32,
    /// `.f64`
    F64,
}

/// One-operand integer ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `not` (also `not.pred`).
    Not,
    /// `neg`
    Neg,
    /// `abs`
    Abs,
    /// `popc` (result .u32).
    Popc,
    /// `clz` (result .u32).
    Clz,
    /// `brev`
    Brev,
    /// `cnot`
    Cnot,
    /// `bfind` (position of the most significant non-sign bit, or 0xffffffff).
    Bfind,
    /// `bfind.shiftamt`
    BfindShiftAmt,
}

/// Two-operand integer ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `add`
    Add,
    /// `add.sat.s32`
    AddSat,
    /// `sub`
    Sub,
    /// `sub.sat.s32`
    SubSat,
    /// `mul.lo`
    MulLo,
    /// `mul.hi`
    MulHi,
    /// `mul.wide` (result twice as wide)
    MulWide,
    /// `div` (truncating)
    Div,
    /// `rem`
    Rem,
    /// `min`
    Min,
    /// `max`
    Max,
    /// `and`
    And,
    /// `or`
    Or,
    /// `xor`
    Xor,
    /// `shl` (amount clamped to the width)
    Shl,
    /// `shr` (arithmetic for .s types)
    Shr,
}

/// Three-operand integer ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerOp {
    /// `mad.lo`
    MadLo,
    /// `mad.hi`
    MadHi,
    /// `mad.wide`
    MadWide,
    /// `bfe` (a, pos, len)
    Bfe,
    /// `prmt.b32` default mode
    Prmt,
    /// `shf.l.wrap` / `shf.l.clamp` (clamp = true)
    ShfL(bool),
    /// `shf.r.wrap` / `shf.r.clamp`
    ShfR(bool),
}

/// Comparison of `setp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `eq`
    Eq,
    /// `ne`
    Ne,
    /// `lt` (`lo` for unsigned)
    Lt,
    /// `le` (`ls`)
    Le,
    /// `gt` (`hi`)
    Gt,
    /// `ge` (`hs`)
    Ge,
    /// Unordered float comparisons: true when either input is NaN.
    Equ,
    /// `neu`
    Neu,
    /// `ltu`
    Ltu,
    /// `leu`
    Leu,
    /// `gtu`
    Gtu,
    /// `geu`
    Geu,
    /// `num`: neither is NaN.
    Num,
    /// `nan`: either is NaN.
    Nan,
}

/// Type of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpTy {
    /// Integer comparison (`.b` types compare unsigned).
    Int(IntTy),
    /// Float comparison (`.ftz` flushes subnormal inputs).
    Float(FTy, bool),
}

/// `.and` / `.or` / `.xor` of `setp` with a third predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoolOp {
    /// `.and`
    And,
    /// `.or`
    Or,
    /// `.xor`
    Xor,
}

/// Rounding of `div` variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DivKind {
    /// `div.rn` (IEEE).
    Rn,
    /// `div.approx.f32`.
    Approx,
    /// `div.full.f32`.
    Full,
}

/// Two-operand float ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FBinOp {
    /// `add.rn`
    Add,
    /// `sub.rn`
    Sub,
    /// `mul.rn`
    Mul,
    /// `div`
    Div(DivKind),
    /// `min` (`.NaN` when true)
    Min(bool),
    /// `max` (`.NaN` when true)
    Max(bool),
    /// `copysign d, a, b`: b's magnitude with a's sign.
    Copysign,
}

/// One-operand float ops (`.approx` ones are computed exactly rounded, see the crate docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FUnOp {
    /// `neg`
    Neg,
    /// `abs`
    Abs,
    /// `sqrt.rn` (false) / `sqrt.approx` (true)
    Sqrt(bool),
    /// `rsqrt.approx`
    Rsqrt,
    /// `rcp.rn` (false) / `rcp.approx` (true)
    Rcp(bool),
    /// `ex2.approx`
    Ex2,
    /// `lg2.approx`
    Lg2,
    /// `tanh.approx`
    Tanh,
    /// `sin.approx`
    Sin,
    /// `cos.approx`
    Cos,
}

/// `testp` classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestpOp {
    /// `.finite`
    Finite,
    /// `.infinite`
    Infinite,
    /// `.number`
    Number,
    /// `.notanumber`
    NotANumber,
    /// `.normal`
    Normal,
    /// `.subnormal`
    Subnormal,
}

/// A numeric type of `cvt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumTy {
    /// Integer.
    Int(IntTy),
    /// `.f16`
    F16,
    /// `.bf16`
    Bf16,
    /// `.tf32` (an f32 bit pattern with 10 mantissa bits)
    Tf32,
    /// `.f32`
    F32,
    /// `.f64`
    F64,
}

/// Rounding modifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rnd {
    /// `.rn` nearest even
    Rn,
    /// `.rna` nearest, ties away from zero
    Rna,
    /// `.rz` toward zero
    Rz,
    /// `.rm` toward -inf
    Rm,
    /// `.rp` toward +inf
    Rp,
    /// `.rni` to an integral value, nearest even
    Rni,
    /// `.rzi`
    Rzi,
    /// `.rmi`
    Rmi,
    /// `.rpi`
    Rpi,
}

/// `cvt` of one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cvt {
    /// Destination type.
    pub to: NumTy,
    /// Source type.
    pub from: NumTy,
    /// Rounding modifier, if any.
    pub rnd: Option<Rnd>,
    /// `.ftz`
    pub ftz: bool,
    /// `.sat`
    pub sat: bool,
    /// `.relu`
    pub relu: bool,
    /// `.satfinite`
    pub satfinite: bool,
}

/// `cvt.rn.f16x2.f32` / `cvt.rn.bf16x2.f32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackTy {
    /// f16 halves
    F16x2,
    /// bf16 halves
    Bf16x2,
}

/// Atomic operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomOp {
    /// `.add` (integer or float)
    Add,
    /// `.min`
    Min,
    /// `.max`
    Max,
    /// `.inc` (wrapping at b)
    Inc,
    /// `.dec`
    Dec,
    /// `.and`
    And,
    /// `.or`
    Or,
    /// `.xor`
    Xor,
    /// `.exch`
    Exch,
    /// `.cas`
    Cas,
}

/// The value type of an atomic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomTy {
    /// Integer.
    Int(IntTy),
    /// `.f32`
    F32,
    /// `.f64`
    F64,
}

/// `shfl.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShflMode {
    /// `.up`
    Up,
    /// `.down`
    Down,
    /// `.bfly`
    Bfly,
    /// `.idx`
    Idx,
}

/// `vote.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteMode {
    /// `.all.pred`
    All,
    /// `.any.pred`
    Any,
    /// `.uni.pred`
    Uni,
    /// `.ballot.b32`
    Ballot,
}

/// `redux.sync` operations (u32/s32 for add/min/max, b32 for the bitwise ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduxOp {
    /// `.add`
    Add,
    /// `.min`
    Min,
    /// `.max`
    Max,
    /// `.and`
    And,
    /// `.or`
    Or,
    /// `.xor`
    Xor,
}

/// The `mma.sync` variants the simulator implements (row.col, f32 accumulators).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaKind {
    /// `m16n8k16.row.col.f32.bf16.bf16.f32`
    Bf16M16N8K16,
    /// `m16n8k16.row.col.f32.f16.f16.f32`
    F16M16N8K16,
    /// `m16n8k8.row.col.f32.tf32.tf32.f32`
    Tf32M16N8K8,
}

/// Input types (and K) of a `wgmma.mma_async` with f32 accumulators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgmmaKind {
    /// `.m64nNk16.f32.bf16.bf16`
    Bf16,
    /// `.m64nNk16.f32.f16.f16`
    F16,
    /// `.m64nNk8.f32.tf32.tf32`
    Tf32,
}

impl WgmmaKind {
    /// K of one instruction.
    pub fn k(self) -> usize {
        match self {
            WgmmaKind::Bf16 | WgmmaKind::F16 => 16,
            WgmmaKind::Tf32 => 8,
        }
    }

    /// Bytes of one input element in shared memory.
    pub fn elem_bytes(self) -> usize {
        match self {
            WgmmaKind::Bf16 | WgmmaKind::F16 => 2,
            WgmmaKind::Tf32 => 4,
        }
    }
}

/// Where the A operand of a `wgmma.mma_async` comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum WgmmaA {
    /// A shared-memory matrix descriptor (64-bit register).
    Desc(Src),
    /// Four registers per thread (the `mma.m16n8k16` A fragment of the warp's 16 rows).
    Regs([Src; 4]),
}

/// `wgmma.mma_async.sync.aligned.m64nNkK.f32.T.T d, a, b-desc, scale-d, ...`.
#[derive(Clone, Debug, PartialEq)]
pub struct Wgmma {
    /// Input types.
    pub kind: WgmmaKind,
    /// N (8..=256, a multiple of 8).
    pub n: u32,
    /// The N/2 accumulator registers (input when `scale_d`, output).
    pub d: Vec<Slot>,
    /// Operand A.
    pub a: WgmmaA,
    /// Descriptor of B.
    pub b: Src,
    /// `scale-d` predicate (negated when `!p`): false computes `D = A·B`.
    pub scale_d: (Src, bool),
    /// `imm-scale-a == -1`.
    pub neg_a: bool,
    /// `imm-scale-b == -1`.
    pub neg_b: bool,
    /// `imm-trans-a == 1` (A M-major).
    pub trans_a: bool,
    /// `imm-trans-b == 1` (B N-major).
    pub trans_b: bool,
}

/// A decoded instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `mov` of a register, immediate, special register or symbol address.
    Mov {
        /// Destination.
        d: Slot,
        /// Source.
        a: Src,
        /// Width in bits.
        bits: u8,
    },
    /// `mov.bN d, {a, b, ..}`: packs `n` parts of `part_bits` (first part lowest).
    Pack {
        /// Destination.
        d: Slot,
        /// Parts, low first.
        parts: [Src; 4],
        /// Number of parts.
        n: u8,
        /// Width of each part.
        part_bits: u8,
    },
    /// `mov.bN {a, b, ..}, s`: unpacks (first destination gets the low part).
    Unpack {
        /// Destinations (`None` for `_`).
        d: [Option<Slot>; 4],
        /// Number of parts.
        n: u8,
        /// Width of each part.
        part_bits: u8,
        /// Source.
        a: Src,
    },
    /// One-operand integer op.
    Unary {
        /// Operation.
        op: UnOp,
        /// Type.
        ty: IntTy,
        /// Destination.
        d: Slot,
        /// Operand.
        a: Src,
    },
    /// Two-operand integer op.
    Binary {
        /// Operation.
        op: BinOp,
        /// Type (of the sources; `mul.wide` writes twice the width).
        ty: IntTy,
        /// Destination.
        d: Slot,
        /// First operand.
        a: Src,
        /// Second operand.
        b: Src,
    },
    /// Three-operand integer op.
    Ternary {
        /// Operation.
        op: TerOp,
        /// Type.
        ty: IntTy,
        /// Destination.
        d: Slot,
        /// First operand.
        a: Src,
        /// Second operand.
        b: Src,
        /// Third operand.
        c: Src,
    },
    /// `bfi.bN d, f, b, pos, len`.
    Bfi {
        /// Width (32 or 64).
        bits: u8,
        /// Destination.
        d: Slot,
        /// Field to insert.
        f: Src,
        /// Base value.
        b: Src,
        /// Start bit.
        pos: Src,
        /// Field length.
        len: Src,
    },
    /// `lop3.b32 d, a, b, c, lut`.
    Lop3 {
        /// Destination.
        d: Slot,
        /// Operands.
        abc: [Src; 3],
        /// Truth table.
        lut: u8,
    },
    /// `setp.cmp[.bool].ty p[|q], a, b[, {!}c]`.
    Setp {
        /// Comparison.
        cmp: Cmp,
        /// Operand type.
        ty: CmpTy,
        /// Result predicate.
        p: Slot,
        /// Complement result (`p|q`).
        q: Option<Slot>,
        /// First operand.
        a: Src,
        /// Second operand.
        b: Src,
        /// Combination with a third predicate (op, predicate, negated).
        combine: Option<(BoolOp, Src, bool)>,
    },
    /// `selp.ty d, a, b, p`: `p ? a : b`.
    Selp {
        /// Width.
        bits: u8,
        /// Destination.
        d: Slot,
        /// Value when true.
        a: Src,
        /// Value when false.
        b: Src,
        /// Selector predicate.
        p: Src,
    },
    /// Two-operand float op.
    FBinary {
        /// Operation.
        op: FBinOp,
        /// Type.
        ty: FTy,
        /// `.ftz`
        ftz: bool,
        /// `.sat`
        sat: bool,
        /// Destination.
        d: Slot,
        /// First operand.
        a: Src,
        /// Second operand.
        b: Src,
    },
    /// One-operand float op.
    FUnary {
        /// Operation.
        op: FUnOp,
        /// Type.
        ty: FTy,
        /// `.ftz`
        ftz: bool,
        /// Destination.
        d: Slot,
        /// Operand.
        a: Src,
    },
    /// `fma.rn` / `mad.rn`: `a * b + c`, one rounding.
    Fma {
        /// Type.
        ty: FTy,
        /// `.ftz`
        ftz: bool,
        /// `.sat`
        sat: bool,
        /// Destination.
        d: Slot,
        /// Factor.
        a: Src,
        /// Factor.
        b: Src,
        /// Addend.
        c: Src,
    },
    /// `testp.op.ty p, a`.
    Testp {
        /// Class tested.
        op: TestpOp,
        /// Type.
        ty: FTy,
        /// Result predicate.
        d: Slot,
        /// Operand.
        a: Src,
    },
    /// `cvt` of one value.
    Cvt {
        /// Conversion.
        cvt: Cvt,
        /// Destination.
        d: Slot,
        /// Source.
        a: Src,
    },
    /// `cvt.rn[.relu][.satfinite].{f16x2,bf16x2}.f32 d, hi, lo`.
    CvtPack {
        /// Result halves.
        ty: PackTy,
        /// `.relu`
        relu: bool,
        /// `.satfinite`
        satfinite: bool,
        /// Destination.
        d: Slot,
        /// Goes to the upper half.
        hi: Src,
        /// Goes to the lower half.
        lo: Src,
    },
    /// `ld`: `n` elements of `bits` each (zero- or sign-extended into the registers).
    Ld {
        /// State space.
        space: Space,
        /// Element width.
        bits: u8,
        /// Sign-extend (`.s` types).
        signed: bool,
        /// Vector length (1, 2, 4).
        n: u8,
        /// Destinations (`None` for `_`).
        d: [Option<Slot>; 4],
        /// Address.
        addr: Addr,
    },
    /// `st`.
    St {
        /// State space.
        space: Space,
        /// Element width.
        bits: u8,
        /// Vector length.
        n: u8,
        /// Values.
        v: [Src; 4],
        /// Address.
        addr: Addr,
    },
    /// `atom` (with `d`) or `red` (without).
    Atom {
        /// State space.
        space: Space,
        /// Operation.
        op: AtomOp,
        /// Value type.
        ty: AtomTy,
        /// Old value destination (`None` for `red`).
        d: Option<Slot>,
        /// Address.
        addr: Addr,
        /// Operand.
        b: Src,
        /// Second operand (`cas` new value).
        c: Src,
    },
    /// `cp.async.{ca,cg}.shared.global [dst], [src], cp_size[, src_size | , ignore_src]`.
    CpAsync {
        /// Bytes of the destination (4, 8, 16).
        cp_size: u8,
        /// Shared destination.
        dst: Addr,
        /// Global source.
        src: Addr,
        /// Bytes actually read (the rest is zero-filled).
        src_size: Option<Src>,
        /// Predicate that, when true, makes the copy read nothing (zero-fill).
        ignore_src: Option<(Src, bool)>,
    },
    /// `cp.async.commit_group`.
    CpAsyncCommit,
    /// `cp.async.wait_group n` (`wait_all` is `commit` + `wait_group 0`).
    CpAsyncWait {
        /// Most groups left pending.
        n: u32,
        /// `wait_all`: commits first.
        all: bool,
    },
    /// `cvta[.to].space.size d, a`.
    Cvta {
        /// `.to` (generic → space) rather than space → generic.
        to: bool,
        /// The non-generic space.
        space: Space,
        /// Destination.
        d: Slot,
        /// Source.
        a: Src,
    },
    /// `isspacep.space p, a`.
    Isspacep {
        /// Space tested.
        space: Space,
        /// Result predicate.
        d: Slot,
        /// Generic address.
        a: Src,
    },
    /// `bra target`.
    Bra {
        /// Instruction index.
        target: u32,
    },
    /// `bar.sync id[, count]` / `barrier.sync[.aligned]`.
    Bar {
        /// Barrier number.
        id: Src,
        /// Expected thread count.
        count: Option<Src>,
        /// `bar.sync` and `barrier.sync.aligned`: the lanes of a warp must wait at the same
        /// instruction (`barrier.sync` without `.aligned` lets them differ).
        aligned: bool,
    },
    /// `bar.warp.sync mask`.
    BarWarp {
        /// Member mask.
        mask: Src,
    },
    /// `shfl.sync.mode.b32 d[|p], a, b, c, mask`.
    Shfl {
        /// Mode.
        mode: ShflMode,
        /// Destination.
        d: Slot,
        /// Optional validity predicate.
        p: Option<Slot>,
        /// Value.
        a: Src,
        /// Lane / delta / xor mask.
        b: Src,
        /// Clamp and segment mask.
        c: Src,
        /// Member mask.
        mask: Src,
    },
    /// `vote.sync.mode d, {!}a, mask`.
    Vote {
        /// Mode.
        mode: VoteMode,
        /// Destination (predicate, or b32 for ballot).
        d: Slot,
        /// Predicate.
        a: Src,
        /// `!a`.
        negate: bool,
        /// Member mask.
        mask: Src,
    },
    /// `redux.sync.op.ty d, a, mask`.
    Redux {
        /// Operation.
        op: ReduxOp,
        /// Signed (`.s32`) for min/max.
        signed: bool,
        /// Destination.
        d: Slot,
        /// Value.
        a: Src,
        /// Member mask.
        mask: Src,
    },
    /// `activemask.b32 d`.
    Activemask {
        /// Destination.
        d: Slot,
    },
    /// `mma.sync.aligned...`.
    Mma {
        /// Shape and types.
        kind: MmaKind,
        /// Accumulator results.
        d: [Slot; 4],
        /// A fragment (4 registers).
        a: [Src; 4],
        /// B fragment (2 registers).
        b: [Src; 2],
        /// C fragment.
        c: [Src; 4],
    },
    /// `ldmatrix.sync.aligned.m8n8.xN[.trans][.shared].b16`.
    Ldmatrix {
        /// Matrices (1, 2, 4).
        n: u8,
        /// `.trans`
        trans: bool,
        /// Destinations.
        d: [Slot; 4],
        /// Row address of this lane.
        addr: Addr,
        /// `Shared`, or `Generic` without a state space.
        space: Space,
    },
    /// `membar` / `fence`: a sequentially consistent fence.
    Fence,
    /// `fence.proxy.async[.shared::cta]`: orders this thread's generic-proxy shared-memory
    /// writes before later async-proxy accesses (wgmma, TMA).
    FenceProxyAsync,
    /// `fence.proxy.tensormap::generic.acquire.<scope> [map], 128`: this thread's later TMA
    /// operations see the tensor map at `map` as the generic proxy last wrote it.
    FenceProxyTensormap {
        /// Generic address of the tensor map.
        map: Addr,
        /// System scope (what a map the host wrote needs), not a narrower one.
        sys: bool,
    },
    /// `mbarrier.init.shared::cta.b64 [addr], count`.
    MbarInit {
        /// The 8-byte barrier object.
        addr: Addr,
        /// Expected arrivals per phase.
        count: Src,
    },
    /// `mbarrier.arrive[.expect_tx].shared::cta.b64 state, [addr][, tx]`, or (without
    /// `arrive`) `mbarrier.expect_tx.shared::cta.b64 [addr], tx`.
    MbarArrive {
        /// The barrier.
        addr: Addr,
        /// Transaction bytes the current phase additionally expects.
        tx: Option<Src>,
        /// Counts as an arrival (false for a bare `expect_tx`).
        arrive: bool,
        /// Destination of the returned state (`None` for `_`).
        state: Option<Slot>,
    },
    /// `mbarrier.{try,test}_wait.parity.shared::cta.b64 p, [addr], parity`.
    MbarWait {
        /// Result predicate.
        p: Slot,
        /// The barrier.
        addr: Addr,
        /// Parity of the phase waited for.
        parity: Src,
        /// `try_wait`: the lane is suspended until the phase completes (the simulator's choice
        /// of the instruction's time limit: unbounded). `test_wait`: answers at once.
        blocking: bool,
    },
    /// `cp.async.bulk.prefetch.L2.global [addr], size`: a hint without effect in the model,
    /// whose operands are checked as the hardware requires (16-byte aligned address and size)
    /// and whose bytes must lie in one allocation (a prefetch past a buffer is a bug the
    /// simulator reports, though the hardware might not).
    BulkPrefetch {
        /// Global address of the first byte.
        addr: Addr,
        /// Bytes.
        size: Src,
    },
    /// `cp.async.bulk.tensor.{2d,3d}.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    /// [dst], [map, {x, y[, z]}], [bar]`.
    TmaLoad {
        /// Shared destination of the box.
        dst: Addr,
        /// Generic address of the tensor map.
        map: Src,
        /// The instruction's dimensionality (2 or 3), which must be the map's rank.
        rank: u8,
        /// Box origin (inner element, row, matrix; the matrix is 0 at rank 2).
        coords: [Src; 3],
        /// The mbarrier whose transaction count the copy completes.
        bar: Addr,
    },
    /// `elect.sync d|p, membermask`: the lowest member lane is elected.
    Elect {
        /// Lane index of the elected lane (`None` for `_`).
        d: Option<Slot>,
        /// True in the elected lane.
        p: Slot,
        /// Member mask.
        mask: Src,
    },
    /// `setmaxnreg.{inc,dec}.sync.aligned.u32 n`.
    Setmaxnreg {
        /// `.inc` (else `.dec`).
        inc: bool,
        /// Register count per thread.
        regs: u32,
    },
    /// `wgmma.fence.sync.aligned`.
    WgmmaFence,
    /// `wgmma.commit_group.sync.aligned`.
    WgmmaCommit,
    /// `wgmma.wait_group.sync.aligned n`.
    WgmmaWait {
        /// Most groups left pending.
        n: u32,
    },
    /// `wgmma.mma_async` (boxed: the largest instruction by far).
    Wgmma(Box<Wgmma>),
    /// Instructions without effect in the model (`prefetch`, `nanosleep`, ...).
    Nop,
    /// `ret` / `exit` of the kernel.
    Exit,
    /// `trap`.
    Trap,
}

impl Op {
    /// Whether this is a warp collective that waits for the lanes named by its mask.
    pub fn is_collective(&self) -> bool {
        matches!(
            self,
            Op::Shfl { .. }
                | Op::Vote { .. }
                | Op::Redux { .. }
                | Op::BarWarp { .. }
                | Op::Mma { .. }
                | Op::Ldmatrix { .. }
                | Op::Elect { .. }
                | Op::Setmaxnreg { .. }
                | Op::WgmmaFence
                | Op::WgmmaCommit
                | Op::WgmmaWait { .. }
                | Op::Wgmma(_)
        )
    }

    /// Whether every lane of the warp must execute the instruction together (`.aligned`).
    pub fn is_aligned(&self) -> bool {
        matches!(
            self,
            Op::Mma { .. }
                | Op::Ldmatrix { .. }
                | Op::Setmaxnreg { .. }
                | Op::WgmmaFence
                | Op::WgmmaCommit
                | Op::WgmmaWait { .. }
                | Op::Wgmma(_)
        )
    }

    /// Whether the instruction uses the async proxy or mbarriers (the simulator then keeps
    /// the vector clocks and proxy state those need).
    pub fn is_hopper_async(&self) -> bool {
        matches!(
            self,
            Op::MbarInit { .. }
                | Op::MbarArrive { .. }
                | Op::MbarWait { .. }
                | Op::TmaLoad { .. }
                | Op::Wgmma(_)
                | Op::FenceProxyAsync
        )
    }
}

impl Op {
    /// Calls `f` with every register the instruction reads or writes (guards excluded), for
    /// the check that nothing touches a `wgmma`'s registers while it is in flight.
    pub fn for_each_reg(&self, mut f: impl FnMut(Slot)) {
        let src = |s: &Src, f: &mut dyn FnMut(Slot)| {
            if let Src::Reg(r) = s {
                f(*r)
            }
        };
        let addr = |a: &Addr, f: &mut dyn FnMut(Slot)| {
            if let Some(r) = a.base {
                f(r)
            }
        };
        let f: &mut dyn FnMut(Slot) = &mut f;
        match self {
            Op::Mov { d, a, .. } | Op::Unary { d, a, .. } | Op::FUnary { d, a, .. } => {
                f(*d);
                src(a, f);
            }
            Op::Testp { d, a, .. } | Op::Cvt { d, a, .. } | Op::Cvta { d, a, .. } => {
                f(*d);
                src(a, f);
            }
            Op::Isspacep { d, a, .. } => {
                f(*d);
                src(a, f);
            }
            Op::Pack { d, parts, n, .. } => {
                f(*d);
                parts.iter().take(*n as usize).for_each(|p| src(p, f));
            }
            Op::Unpack { d, a, .. } => {
                d.iter().flatten().for_each(|r| f(*r));
                src(a, f);
            }
            Op::Binary { d, a, b, .. } | Op::FBinary { d, a, b, .. } => {
                f(*d);
                src(a, f);
                src(b, f);
            }
            Op::CvtPack { d, hi, lo, .. } => {
                f(*d);
                src(hi, f);
                src(lo, f);
            }
            Op::Ternary { d, a, b, c, .. } | Op::Fma { d, a, b, c, .. } => {
                f(*d);
                [a, b, c].into_iter().for_each(|s| src(s, f));
            }
            Op::Bfi { d, f: fld, b, pos, len, .. } => {
                f(*d);
                [fld, b, pos, len].into_iter().for_each(|s| src(s, f));
            }
            Op::Lop3 { d, abc, .. } => {
                f(*d);
                abc.iter().for_each(|s| src(s, f));
            }
            Op::Setp { p, q, a, b, combine, .. } => {
                f(*p);
                if let Some(q) = q {
                    f(*q);
                }
                src(a, f);
                src(b, f);
                if let Some((_, c, _)) = combine {
                    src(c, f);
                }
            }
            Op::Selp { d, a, b, p, .. } => {
                f(*d);
                [a, b, p].into_iter().for_each(|s| src(s, f));
            }
            Op::Ld { d, n, addr: ad, .. } => {
                d.iter().take(*n as usize).flatten().for_each(|r| f(*r));
                addr(ad, f);
            }
            Op::St { v, n, addr: ad, .. } => {
                v.iter().take(*n as usize).for_each(|s| src(s, f));
                addr(ad, f);
            }
            Op::Atom { d, addr: ad, b, c, .. } => {
                if let Some(d) = d {
                    f(*d);
                }
                addr(ad, f);
                src(b, f);
                src(c, f);
            }
            Op::CpAsync { dst, src: s, src_size, ignore_src, .. } => {
                addr(dst, f);
                addr(s, f);
                if let Some(n) = src_size {
                    src(n, f);
                }
                if let Some((p, _)) = ignore_src {
                    src(p, f);
                }
            }
            Op::Bar { id, count, .. } => {
                src(id, f);
                if let Some(c) = count {
                    src(c, f);
                }
            }
            Op::BarWarp { mask } => src(mask, f),
            Op::Shfl { d, p, a, b, c, mask, .. } => {
                f(*d);
                if let Some(p) = p {
                    f(*p);
                }
                [a, b, c, mask].into_iter().for_each(|s| src(s, f));
            }
            Op::Vote { d, a, mask, .. } | Op::Redux { d, a, mask, .. } => {
                f(*d);
                src(a, f);
                src(mask, f);
            }
            Op::Activemask { d } => f(*d),
            Op::Mma { d, a, b, c, .. } => {
                d.iter().for_each(|r| f(*r));
                a.iter().chain(b).chain(c).for_each(|s| src(s, f));
            }
            Op::Ldmatrix { n, d, addr: ad, .. } => {
                d.iter().take(*n as usize).for_each(|r| f(*r));
                addr(ad, f);
            }
            Op::MbarInit { addr: ad, count } => {
                addr(ad, f);
                src(count, f);
            }
            Op::MbarArrive { addr: ad, tx, state, .. } => {
                addr(ad, f);
                if let Some(tx) = tx {
                    src(tx, f);
                }
                if let Some(s) = state {
                    f(*s);
                }
            }
            Op::MbarWait { p, addr: ad, parity, .. } => {
                f(*p);
                addr(ad, f);
                src(parity, f);
            }
            Op::FenceProxyTensormap { map, .. } => addr(map, f),
            Op::BulkPrefetch { addr: ad, size } => {
                addr(ad, f);
                src(size, f);
            }
            Op::TmaLoad { dst, map, coords, bar, .. } => {
                addr(dst, f);
                addr(bar, f);
                src(map, f);
                coords.iter().for_each(|s| src(s, f));
            }
            Op::Elect { d, p, mask } => {
                if let Some(d) = d {
                    f(*d);
                }
                f(*p);
                src(mask, f);
            }
            Op::Wgmma(w) => {
                w.d.iter().for_each(|r| f(*r));
                match &w.a {
                    WgmmaA::Desc(s) => src(s, f),
                    WgmmaA::Regs(r) => r.iter().for_each(|s| src(s, f)),
                }
                src(&w.b, f);
                src(&w.scale_d.0, f);
            }
            Op::CpAsyncCommit
            | Op::CpAsyncWait { .. }
            | Op::Bra { .. }
            | Op::Fence
            | Op::FenceProxyAsync
            | Op::Setmaxnreg { .. }
            | Op::WgmmaFence
            | Op::WgmmaCommit
            | Op::WgmmaWait { .. }
            | Op::Nop
            | Op::Exit
            | Op::Trap => {}
        }
    }
}
