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
        )
    }

    /// Whether every lane of the warp must execute the instruction together (`.aligned`).
    pub fn is_aligned(&self) -> bool {
        matches!(self, Op::Mma { .. } | Op::Ldmatrix { .. })
    }
}
