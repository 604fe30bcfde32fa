//! Turns a parsed module into executable kernels: each instruction becomes an [`Op`] with
//! register names resolved to slots, labels to instruction indices and symbols to addresses.
//!
//! Every opcode, modifier and operand shape is checked here; anything the simulator does not
//! implement is an error naming the kernel, PTX line and instruction. A kernel that fails to
//! decode keeps its error, reported when it is launched (other kernels stay usable).

mod alu;
mod control;
mod hopper;
mod mem;
mod mods;
pub mod op;

use crate::memory::SHARED_BASE;
use crate::parse::{
    DeclSpace, FunctionAst, InstrAst, ModuleAst, Operand, Stmt, VarDecl, type_size,
};
use mods::Mods;
use op::{Addr, Guard, LaneMask, Op, Slot, Special, Src};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A decoded instruction: the operation and its guard predicate.
#[derive(Clone, Debug, PartialEq)]
pub struct Instr {
    /// What it does.
    pub op: Op,
    /// `@p` / `@!p`.
    pub guard: Option<Guard>,
}

/// Where an instruction came from, for messages.
#[derive(Clone, Debug)]
pub struct InstrInfo {
    /// 1-based PTX line.
    pub line: u32,
    /// The instruction as written.
    pub text: String,
}

/// A decoded `.entry`.
#[derive(Debug)]
pub struct Kernel {
    /// Entry name.
    pub name: String,
    /// Total parameter bytes (what the launch must supply).
    pub param_size: u64,
    /// The instructions; index = program counter. The last one is an implicit `exit`.
    pub instrs: Vec<Instr>,
    /// Source of each instruction.
    pub info: Vec<InstrInfo>,
    /// Registers per lane (predicates included).
    pub slots: u32,
    /// Bytes of `.local` memory per thread.
    pub local_size: u64,
    /// Shared address one past the static `.shared` variables.
    pub static_shared_end: u32,
    /// Shared address of the dynamic shared memory (`.extern .shared`).
    pub dynamic_shared_base: u32,
    /// Uses mbarriers or the async proxy (TMA, wgmma): blocks then keep vector clocks for the
    /// race check and the proxy-fence state.
    pub hopper_async: bool,
    /// `.maxntid` / `.reqntid`, which every launch must respect.
    pub bounds: crate::parse::LaunchBounds,
}

/// A decoding failure.
#[derive(Clone, Debug)]
pub struct DecodeError {
    /// The kernel.
    pub kernel: String,
    /// PTX line.
    pub line: u32,
    /// The instruction or declaration as written.
    pub text: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} — kernel `{}`, PTX line {}: `{}`",
            self.message, self.kernel, self.line, self.text
        )
    }
}

/// Every kernel of a module, decoded (or the reason it could not be).
pub type Kernels = BTreeMap<String, Result<Arc<Kernel>, DecodeError>>;

/// Decodes every `.entry` of `module`.
pub fn decode_module(module: &ModuleAst) -> Kernels {
    let mut shared = HashMap::new();
    let mut end = SHARED_BASE as u64;
    let mut extern_align = 16u64;
    let mut externs = Vec::new();
    for var in module.vars.iter().filter(|v| v.space == DeclSpace::Shared) {
        if var.is_extern {
            extern_align = extern_align.max(var.align as u64);
            externs.push(var.name.clone());
        } else {
            end = end.next_multiple_of(var.align.max(1) as u64);
            shared.insert(var.name.clone(), end);
            end += var.size;
        }
    }
    let unsupported: HashMap<String, u32> = module
        .vars
        .iter()
        .filter(|v| v.space != DeclSpace::Shared)
        .map(|v| (v.name.clone(), v.line))
        .collect();
    let layout = SharedLayout { vars: shared, static_end: end, extern_align, externs };
    module
        .functions
        .iter()
        .filter(|f| f.is_entry)
        .map(|f| (f.name.clone(), decode_kernel(f, &layout, &unsupported).map(Arc::new)))
        .collect()
}

/// Module-level shared variables: name → address, and where the dynamic part starts.
struct SharedLayout {
    vars: HashMap<String, u64>,
    static_end: u64,
    extern_align: u64,
    externs: Vec<String>,
}

/// How a register was declared: a predicate or a data register (`.b16` .. `.f64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RegKind {
    Pred,
    Data,
}

/// What an immediate operand must be encoded as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    /// Integer of this width (float literals keep their bits).
    Int(u8),
    /// f32 bits.
    F32,
    /// f64 bits.
    F64,
    /// A predicate.
    Pred,
}

/// Decoding state of one function.
pub(crate) struct FnDecoder<'a> {
    scopes: Vec<HashMap<String, (Slot, RegKind)>>,
    slots: u32,
    labels: HashMap<String, u32>,
    params: HashMap<String, u64>,
    locals: HashMap<String, u64>,
    local_size: u64,
    shared: HashMap<String, u64>,
    unsupported_vars: &'a HashMap<String, u32>,
}

fn decode_kernel(
    f: &FunctionAst,
    layout: &SharedLayout,
    unsupported_vars: &HashMap<String, u32>,
) -> Result<Kernel, DecodeError> {
    let fail = |line: u32, text: &str, message: String| DecodeError {
        kernel: f.name.clone(),
        line,
        text: text.to_string(),
        message,
    };
    let body = f.body.as_ref().ok_or_else(|| fail(f.line, &f.name, "entry has no body".into()))?;
    let mut params = HashMap::new();
    let mut offset = 0u64;
    for p in &f.params {
        offset = offset.next_multiple_of(p.align.max(1) as u64);
        params.insert(p.name.clone(), offset);
        offset += p.size;
    }
    let mut d = FnDecoder {
        scopes: vec![HashMap::new()],
        slots: 0,
        labels: HashMap::new(),
        params,
        locals: HashMap::new(),
        local_size: 0,
        shared: layout.vars.clone(),
        unsupported_vars,
    };
    // Labels first (branches may point forward); then function-level shared variables, which
    // extend the static shared memory of this kernel.
    let mut pc = 0u32;
    let mut static_end = layout.static_end;
    for stmt in body {
        match stmt {
            Stmt::Label(name) => {
                d.labels.insert(name.clone(), pc);
            }
            Stmt::Instr(_) => pc += 1,
            Stmt::Var(v) if v.space == DeclSpace::Shared => {
                static_end = static_end.next_multiple_of(v.align.max(1) as u64);
                d.shared.insert(v.name.clone(), static_end);
                static_end += v.size;
            }
            _ => {}
        }
    }
    let dynamic_base = static_end.next_multiple_of(layout.extern_align);
    for name in &layout.externs {
        d.shared.insert(name.clone(), dynamic_base);
    }
    let mut instrs = Vec::new();
    let mut info = Vec::new();
    for stmt in body {
        match stmt {
            Stmt::Open => d.scopes.push(HashMap::new()),
            Stmt::Close => {
                d.scopes.pop();
            }
            Stmt::Label(_) => {}
            Stmt::Reg { ty, names, line } => {
                d.declare(ty, names).map_err(|m| fail(*line, ty, m))?;
            }
            Stmt::Var(v) => d.declare_var(v).map_err(|m| fail(v.line, &v.name, m))?,
            Stmt::Instr(ast) => {
                let instr = d.instr(ast).map_err(|m| fail(ast.line, &ast.text, m))?;
                instrs.push(instr);
                info.push(InstrInfo { line: ast.line, text: ast.text.clone() });
            }
        }
    }
    instrs.push(Instr { op: Op::Exit, guard: None });
    info.push(InstrInfo { line: f.line, text: "(end of kernel)".into() });
    Ok(Kernel {
        name: f.name.clone(),
        param_size: offset,
        info,
        slots: d.slots,
        local_size: d.local_size,
        static_shared_end: static_end as u32,
        dynamic_shared_base: dynamic_base as u32,
        hopper_async: instrs.iter().any(|i| i.op.is_hopper_async()),
        bounds: f.bounds,
        instrs,
    })
}

impl FnDecoder<'_> {
    fn declare(&mut self, ty: &str, names: &[(String, Option<u32>)]) -> Result<(), String> {
        let kind = match ty {
            ".pred" => RegKind::Pred,
            _ => match type_size(ty) {
                Some(2 | 4 | 8) => RegKind::Data,
                _ => return Err(format!("unsupported register type `{ty}`")),
            },
        };
        let scope = self.scopes.last_mut().expect("the function scope is never popped");
        for (name, count) in names {
            match count {
                Some(n) => {
                    for i in 0..*n {
                        scope.insert(format!("{name}{i}"), (self.slots, kind));
                        self.slots += 1;
                    }
                }
                None => {
                    scope.insert(name.clone(), (self.slots, kind));
                    self.slots += 1;
                }
            }
        }
        Ok(())
    }

    fn declare_var(&mut self, v: &VarDecl) -> Result<(), String> {
        match v.space {
            DeclSpace::Local => {
                self.local_size = self.local_size.next_multiple_of(v.align.max(1) as u64);
                self.locals.insert(v.name.clone(), self.local_size);
                self.local_size += v.size;
                Ok(())
            }
            DeclSpace::Shared => Ok(()),
            _ => Err("only .local and .shared variables are supported inside functions".into()),
        }
    }

    fn instr(&mut self, ast: &InstrAst) -> Result<Instr, String> {
        let guard = match &ast.guard {
            Some((name, negate)) => Some(Guard { slot: self.pred_reg(name)?, negate: *negate }),
            None => None,
        };
        let mut m = Mods::new(&ast.opcode);
        let ops = ast.operands.as_slice();
        let op = match m.base {
            "mov" | "add" | "sub" | "mul" | "mad" | "fma" | "div" | "rem" | "abs" | "neg"
            | "min" | "max" | "and" | "or" | "xor" | "not" | "cnot" | "shl" | "shr" | "popc"
            | "clz" | "brev" | "bfind" | "bfe" | "bfi" | "prmt" | "shf" | "lop3" | "sqrt"
            | "rsqrt" | "rcp" | "ex2" | "lg2" | "tanh" | "sin" | "cos" | "copysign" | "testp"
            | "setp" | "selp" | "cvt" => alu::decode(self, &mut m, ops)?,
            "ld" | "ldu" | "st" | "atom" | "red" | "cp" | "cvta" | "isspacep" | "prefetch"
            | "prefetchu" | "membar" | "fence" => mem::decode(self, &mut m, ops)?,
            "bra" | "ret" | "exit" | "trap" | "bar" | "barrier" | "shfl" | "vote" | "redux"
            | "activemask" | "mma" | "ldmatrix" | "nanosleep" => {
                control::decode(self, &mut m, ops)?
            }
            "mbarrier" | "elect" | "setmaxnreg" | "wgmma" | "griddepcontrol" => {
                hopper::decode(self, &mut m, ops)?
            }
            _ => return Err(format!("unknown instruction `{}`", ast.opcode)),
        };
        m.finish()?;
        Ok(Instr { op, guard })
    }

    fn lookup(&self, name: &str) -> Option<(Slot, RegKind)> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    /// A declared predicate register.
    pub(crate) fn pred_reg(&self, name: &str) -> Result<Slot, String> {
        match self.lookup(name) {
            Some((slot, RegKind::Pred)) => Ok(slot),
            Some(_) => Err(format!("`{name}` is not a predicate register")),
            None => Err(format!("undeclared register `{name}`")),
        }
    }

    /// Whether `o` names a predicate register.
    pub(crate) fn is_pred(&self, o: &Operand) -> bool {
        match o {
            Operand::Name(n) | Operand::Not(n) => {
                matches!(self.lookup(n), Some((_, RegKind::Pred)))
            }
            _ => false,
        }
    }

    /// A destination register.
    pub(crate) fn dst(&self, o: &Operand) -> Result<Slot, String> {
        match o {
            Operand::Name(n) => match self.lookup(n) {
                Some((slot, _)) => Ok(slot),
                None => Err(self.unknown_name(n)),
            },
            other => Err(format!("expected a destination register, found {other:?}")),
        }
    }

    /// A destination register or `_`.
    pub(crate) fn dst_or_sink(&self, o: &Operand) -> Result<Option<Slot>, String> {
        match o {
            Operand::Sink => Ok(None),
            o => self.dst(o).map(Some),
        }
    }

    fn unknown_name(&self, n: &str) -> String {
        match self.unsupported_vars.get(n) {
            Some(line) => format!(
                "`{n}` is a module-level .global/.const variable (line {line}); the simulator \
                 supports only .shared variables"
            ),
            None => format!("undeclared name `{n}`"),
        }
    }

    /// A source operand, immediates encoded as `want`.
    pub(crate) fn src(&self, o: &Operand, want: Want) -> Result<Src, String> {
        let int_bits = |v: u64, bits: u8| if bits >= 64 { v } else { v & ((1u64 << bits) - 1) };
        Ok(match (o, want) {
            (Operand::Name(n), _) => {
                if let Some((slot, _)) = self.lookup(n) {
                    Src::Reg(slot)
                } else if let Some(s) = special(n) {
                    Src::Special(s)
                } else if let Some(addr) = self.symbol(n) {
                    Src::Imm(addr)
                } else {
                    return Err(self.unknown_name(n));
                }
            }
            (Operand::Int(v), Want::Int(bits)) => Src::Imm(int_bits(*v as u64, bits)),
            (Operand::Int(v), Want::Pred) => Src::Imm((*v != 0) as u64),
            (Operand::Int(v), Want::F32) => Src::Imm((*v as f32).to_bits() as u64),
            (Operand::Int(v), Want::F64) => Src::Imm((*v as f64).to_bits()),
            (Operand::F32(b), Want::F32) => Src::Imm(*b as u64),
            (Operand::F32(b), Want::F64) => Src::Imm((f32::from_bits(*b) as f64).to_bits()),
            (Operand::F32(b), Want::Int(_)) => Src::Imm(*b as u64),
            (Operand::F64(b), Want::F64) => Src::Imm(*b),
            (Operand::F64(b), Want::F32) => Src::Imm((f64::from_bits(*b) as f32).to_bits() as u64),
            (Operand::F64(b), Want::Int(64)) => Src::Imm(*b),
            (Operand::F64(b), Want::Int(_)) => {
                Src::Imm((f64::from_bits(*b) as f32).to_bits() as u64)
            }
            (other, _) => return Err(format!("unexpected operand {other:?}")),
        })
    }

    /// A predicate operand that may be negated: `p` or `!p` (or an immediate 0/1).
    pub(crate) fn pred_src(&self, o: &Operand) -> Result<(Src, bool), String> {
        match o {
            Operand::Not(n) => Ok((Src::Reg(self.pred_reg(n)?), true)),
            Operand::Name(n) => Ok((Src::Reg(self.pred_reg(n)?), false)),
            Operand::Int(v) => Ok((Src::Imm((*v != 0) as u64), false)),
            other => Err(format!("expected a predicate, found {other:?}")),
        }
    }

    /// The address of a symbol in its own state space (`mov.u64 %rd, sym`).
    fn symbol(&self, name: &str) -> Option<u64> {
        self.params
            .get(name)
            .or_else(|| self.shared.get(name))
            .or_else(|| self.locals.get(name))
            .copied()
    }

    /// `[reg+off]`, `[sym+off]` or `[imm]`.
    pub(crate) fn addr(&self, o: &Operand) -> Result<Addr, String> {
        let Operand::Addr { base, offset } = o else {
            return Err(format!("expected an address `[...]`, found {o:?}"));
        };
        let offset = *offset as u64;
        Ok(match base {
            None => Addr { base: None, offset },
            Some(name) => match self.lookup(name) {
                Some((slot, _)) => Addr { base: Some(slot), offset },
                None => match self.symbol(name) {
                    Some(sym) => Addr { base: None, offset: sym.wrapping_add(offset) },
                    None => return Err(self.unknown_name(name)),
                },
            },
        })
    }

    /// A label's instruction index.
    pub(crate) fn label(&self, o: &Operand) -> Result<u32, String> {
        match o {
            Operand::Name(n) => {
                self.labels.get(n).copied().ok_or_else(|| format!("unknown label `{n}`"))
            }
            other => Err(format!("expected a label, found {other:?}")),
        }
    }
}

/// `%tid.x` and friends.
fn special(name: &str) -> Option<Special> {
    let dim = |s: &str| match s {
        "x" => Some(0),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    if let Some((reg, d)) = name.split_once('.') {
        let d = dim(d)?;
        return match reg {
            "%tid" => Some(Special::Tid(d)),
            "%ntid" => Some(Special::Ntid(d)),
            "%ctaid" => Some(Special::Ctaid(d)),
            "%nctaid" => Some(Special::Nctaid(d)),
            _ => None,
        };
    }
    Some(match name {
        "%laneid" => Special::LaneId,
        "%warpid" => Special::WarpId,
        "%nwarpid" => Special::NWarpId,
        "%lanemask_eq" => Special::LaneMask(LaneMask::Eq),
        "%lanemask_lt" => Special::LaneMask(LaneMask::Lt),
        "%lanemask_le" => Special::LaneMask(LaneMask::Le),
        "%lanemask_gt" => Special::LaneMask(LaneMask::Gt),
        "%lanemask_ge" => Special::LaneMask(LaneMask::Ge),
        "%clock" | "%clock64" => Special::Clock,
        "%smid" => Special::SmId,
        "%nsmid" => Special::NSmId,
        "%dynamic_smem_size" => Special::DynamicSmemSize,
        "%total_smem_size" => Special::TotalSmemSize,
        _ => return None,
    })
}

/// Fails unless there are exactly `n` operands.
pub(crate) fn arity(ops: &[Operand], n: usize, what: &str) -> Result<(), String> {
    if ops.len() != n {
        return Err(format!("`{what}` takes {n} operands, found {}", ops.len()));
    }
    Ok(())
}

/// The single type modifier of an instruction.
pub(crate) fn one_type<'a>(m: &mut Mods<'a>) -> Result<&'a str, String> {
    match m.types().as_slice() {
        [t] => Ok(t),
        [] => Err(format!("`{}` has no type", m.base)),
        more => Err(format!("`{}` has several types {more:?}", m.base)),
    }
}
