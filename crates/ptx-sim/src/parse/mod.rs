//! A parser for the PTX that LLVM's NVPTX back end emits (plus hand-written test snippets).
//!
//! It reads a module into a small syntax tree ([`ModuleAst`]) without interpreting
//! instructions: opcodes stay dotted strings and operands stay names and literals. The
//! decoder ([`crate::decode`]) gives them meaning, so every unknown opcode or modifier is
//! reported there, with its line and kernel.

mod lexer;

use lexer::{Tok, Token, tokenize};
use std::fmt;

/// A syntax error, with its 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Line of the offending token.
    pub line: u32,
    /// What was expected or found.
    pub message: String,
}

impl ParseError {
    fn new(line: u32, message: impl Into<String>) -> Self {
        Self { line, message: message.into() }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PTX line {}: {}", self.line, self.message)
    }
}

/// A whole module.
#[derive(Debug, Default)]
pub struct ModuleAst {
    /// `.version major.minor`.
    pub version: (u32, u32),
    /// `.target` names (`sm_80`, ...).
    pub target: Vec<String>,
    /// `.address_size` (64 when absent... LLVM always writes it).
    pub address_size: u32,
    /// Module-level variables (`.shared`, `.extern .shared`, `.global`, `.const`).
    pub vars: Vec<VarDecl>,
    /// `.entry` kernels and `.func` device functions.
    pub functions: Vec<FunctionAst>,
}

/// A state space of a variable declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclSpace {
    /// `.shared`
    Shared,
    /// `.global`
    Global,
    /// `.const`
    Const,
    /// `.local`
    Local,
}

/// `[.extern] .space [.align A] .type name[N] [= {...}];`
#[derive(Clone, Debug)]
pub struct VarDecl {
    /// State space.
    pub space: DeclSpace,
    /// Declared with `.extern` (for `.shared`: the dynamic shared memory).
    pub is_extern: bool,
    /// `.align`, or the element size.
    pub align: u32,
    /// Name.
    pub name: String,
    /// Total size in bytes (0 for `name[]`).
    pub size: u64,
    /// Source line.
    pub line: u32,
}

/// One `.param` of a function.
#[derive(Clone, Debug)]
pub struct ParamDecl {
    /// Name (`k_param_0`).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Alignment in bytes.
    pub align: u32,
}

/// An `.entry` or `.func`.
#[derive(Debug)]
pub struct FunctionAst {
    /// Name.
    pub name: String,
    /// `.entry` (a kernel) rather than `.func`.
    pub is_entry: bool,
    /// Parameters in order.
    pub params: Vec<ParamDecl>,
    /// Body statements (`None` for a prototype).
    pub body: Option<Vec<Stmt>>,
    /// Line of the name.
    pub line: u32,
    /// The launch bounds the entry declares.
    pub bounds: LaunchBounds,
}

/// An entry's `.maxntid` and `.reqntid` directives (missing dimensions are 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchBounds {
    /// `.maxntid x, y, z`: the most threads per block, `x · y · z` (a launch with more fails).
    pub max_threads: Option<u64>,
    /// `.reqntid x, y, z`: the exact block shape every launch must use.
    pub required_block: Option<[u32; 3]>,
}

/// A statement of a function body.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `{`: opens a register scope.
    Open,
    /// `}`: closes it.
    Close,
    /// `name:`
    Label(String),
    /// `.reg .type name, name<N>, ...;` — each name with its count when written `name<N>`.
    Reg {
        /// Register type (`.b32`, `.pred`, ...).
        ty: String,
        /// Names and, for `%r<N>`, the count N.
        names: Vec<(String, Option<u32>)>,
        /// Source line.
        line: u32,
    },
    /// `.local`/`.shared` declaration inside a function.
    Var(VarDecl),
    /// An instruction.
    Instr(InstrAst),
}

/// An instruction: guard, dotted opcode, operands.
#[derive(Clone, Debug)]
pub struct InstrAst {
    /// Source line of the opcode.
    pub line: u32,
    /// The source text (whitespace collapsed), for messages.
    pub text: String,
    /// `@p` / `@!p`: the predicate name and whether it is negated.
    pub guard: Option<(String, bool)>,
    /// `ld.global.v4.u32`.
    pub opcode: String,
    /// Operands in order.
    pub operands: Vec<Operand>,
}

/// An operand as written.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// A register, special register, label or symbol name.
    Name(String),
    /// `!name` (a negated predicate).
    Not(String),
    /// An integer literal, negated when written with `-`.
    Int(i128),
    /// A 32-bit float literal (bits).
    F32(u32),
    /// A 64-bit float literal (bits).
    F64(u64),
    /// `[base+offset]`, `[base]`, `[offset]`.
    Addr {
        /// Register or symbol, if any.
        base: Option<String>,
        /// Byte offset.
        offset: i64,
    },
    /// `{a, b, ...}` (vector operand); `_` elements are [`Operand::Sink`].
    Vec(Vec<Operand>),
    /// `[map, {x, y}]`: a tensor-map address and the tile coordinates (`cp.async.bulk.tensor`).
    Tensor {
        /// Register holding the tensor map's address.
        map: String,
        /// The coordinate vector.
        coords: Box<Operand>,
    },
    /// `p|q` (the two predicate results of `setp`, `d|p` of `shfl`, `_|p` of `elect.sync`).
    Pair(String, String),
    /// `_`: a result that is discarded.
    Sink,
}

/// Parses a PTX module.
pub fn parse_module(src: &str) -> Result<ModuleAst, ParseError> {
    let tokens = tokenize(src)?;
    Parser { src, tokens, pos: 0 }.module()
}

struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    pos: usize,
}

/// Size in bytes of a scalar PTX type name (`.b8` .. `.f64`, `.pred` counts 1).
pub fn type_size(ty: &str) -> Option<u64> {
    Some(match ty.trim_start_matches('.') {
        "b8" | "u8" | "s8" | "pred" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" | "tf32" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        "b128" => 16,
        _ => return None,
    })
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos).map(|t| &t.tok)
    }

    fn line(&self) -> u32 {
        self.tokens.get(self.pos).or(self.tokens.last()).map_or(0, |t| t.line)
    }

    fn err<T>(&self, message: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError::new(self.line(), message))
    }

    fn next(&mut self) -> Result<Tok, ParseError> {
        let tok = self.peek().cloned();
        match tok {
            Some(t) => {
                self.pos += 1;
                Ok(t)
            }
            None => self.err("unexpected end of input"),
        }
    }

    fn is_punct(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }

    fn eat_punct(&mut self, c: char) -> bool {
        let hit = self.is_punct(c);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn expect_punct(&mut self, c: char) -> Result<(), ParseError> {
        if self.eat_punct(c) {
            return Ok(());
        }
        let found = self.peek().cloned();
        self.err(format!("expected `{c}`, found {found:?}"))
    }

    fn ident(&mut self) -> Result<String, ParseError> {
        match self.next()? {
            Tok::Ident(s) => Ok(s),
            other => self.err(format!("expected a name, found {other:?}")),
        }
    }

    fn is_ident(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(s)) if s == word)
    }

    fn eat_ident(&mut self, word: &str) -> bool {
        let hit = self.is_ident(word);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn int(&mut self) -> Result<u64, ParseError> {
        match self.next()? {
            Tok::Int(v) => Ok(v),
            other => self.err(format!("expected an integer, found {other:?}")),
        }
    }

    fn module(mut self) -> Result<ModuleAst, ParseError> {
        let mut m = ModuleAst { address_size: 64, ..ModuleAst::default() };
        while let Some(tok) = self.peek().cloned() {
            let Tok::Ident(word) = tok else {
                return self.err(format!("unexpected {tok:?} at module level"));
            };
            match word.as_str() {
                ".version" => {
                    self.pos += 1;
                    let line = self.line();
                    let token = self.tokens.get(self.pos).map_or("", |t| &self.src[t.start..t.end]);
                    let parsed = token
                        .split_once('.')
                        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
                    m.version = parsed
                        .ok_or_else(|| ParseError::new(line, format!("bad .version `{token}`")))?;
                    self.pos += 1;
                }
                ".target" => {
                    self.pos += 1;
                    m.target.push(self.ident()?);
                    while self.eat_punct(',') {
                        m.target.push(self.ident()?);
                    }
                }
                ".address_size" => {
                    self.pos += 1;
                    m.address_size = self.int()? as u32;
                }
                ".visible" | ".weak" | ".extern" | ".common" | ".entry" | ".func" | ".shared"
                | ".global" | ".const" => {
                    let mut is_extern = false;
                    while let Some(Tok::Ident(w)) = self.peek() {
                        match w.as_str() {
                            ".visible" | ".weak" | ".common" => self.pos += 1,
                            ".extern" => {
                                is_extern = true;
                                self.pos += 1;
                            }
                            _ => break,
                        }
                    }
                    if self.eat_ident(".entry") {
                        m.functions.push(self.function(true)?);
                    } else if self.eat_ident(".func") {
                        m.functions.push(self.function(false)?);
                    } else {
                        let decl = self.var_decl(is_extern)?;
                        m.vars.push(decl);
                    }
                }
                ".pragma" => self.skip_statement()?,
                other => return self.err(format!("unsupported module-level directive `{other}`")),
            }
        }
        Ok(m)
    }

    fn skip_statement(&mut self) -> Result<(), ParseError> {
        while !self.eat_punct(';') {
            self.next()?;
        }
        Ok(())
    }

    /// `.space [.align A] [.ptr...] .type name[N] [= {..}];` (the `.space` not yet consumed).
    fn var_decl(&mut self, is_extern: bool) -> Result<VarDecl, ParseError> {
        let line = self.line();
        let space = match self.ident()?.as_str() {
            ".shared" => DeclSpace::Shared,
            ".global" => DeclSpace::Global,
            ".const" => DeclSpace::Const,
            ".local" => DeclSpace::Local,
            other => return self.err(format!("unsupported declaration `{other}`")),
        };
        let mut align = None;
        let mut ty = None;
        loop {
            let word = self.ident()?;
            if word == ".align" {
                align = Some(self.int()? as u32);
            } else if let Some(size) = type_size(&word) {
                ty = Some(size);
            } else if word.starts_with('.') {
                return self.err(format!("unsupported qualifier `{word}` in declaration"));
            } else {
                let elem = match ty {
                    Some(t) => t,
                    None => return self.err(format!("declaration of `{word}` has no type")),
                };
                let mut size = elem;
                while self.eat_punct('[') {
                    if self.eat_punct(']') {
                        size = 0;
                        continue;
                    }
                    size *= self.int()?;
                    self.expect_punct(']')?;
                }
                self.skip_statement()?;
                return Ok(VarDecl {
                    space,
                    is_extern,
                    align: align.unwrap_or(elem as u32),
                    name: word,
                    size,
                    line,
                });
            }
        }
    }

    /// After `.entry`/`.func`: `[(ret)] name(params) [directives] {body}|;`.
    fn function(&mut self, is_entry: bool) -> Result<FunctionAst, ParseError> {
        if self.is_punct('(') {
            // A return parameter list of a `.func`: only its syntax matters here.
            self.param_list()?;
        }
        let line = self.line();
        let name = self.ident()?;
        let params = if self.is_punct('(') { self.param_list()? } else { Vec::new() };
        // Performance directives (`.maxntid 256, 1, 1`, `.reqntid`, `.noreturn`, ...): the
        // launch bounds are kept, the rest only parsed.
        let mut bounds = LaunchBounds::default();
        while let Some(Tok::Ident(w)) = self.peek() {
            if !w.starts_with('.') {
                break;
            }
            let directive = w.clone();
            self.pos += 1;
            let mut dims = Vec::new();
            while let Some(&Tok::Int(v)) = self.peek() {
                dims.push(v);
                self.pos += 1;
                self.eat_punct(',');
            }
            if matches!(directive.as_str(), ".maxntid" | ".reqntid") {
                if dims.is_empty() || dims.len() > 3 || dims.iter().any(|&d| d == 0 || d > 1024) {
                    let what = format!("`{directive}` takes 1 to 3 dimensions in 1..=1024");
                    return Err(ParseError::new(self.line(), what));
                }
                let dim = |i: usize| dims.get(i).copied().unwrap_or(1);
                if directive == ".maxntid" {
                    bounds.max_threads = Some(dims.iter().product());
                } else {
                    bounds.required_block = Some([0, 1, 2].map(|i| dim(i) as u32));
                }
            }
        }
        let body = if self.eat_punct(';') { None } else { Some(self.body()?) };
        Ok(FunctionAst { name, is_entry, params, body, line, bounds })
    }

    fn param_list(&mut self) -> Result<Vec<ParamDecl>, ParseError> {
        self.expect_punct('(')?;
        let mut params = Vec::new();
        while !self.eat_punct(')') {
            if !self.eat_ident(".param") && !self.eat_ident(".reg") {
                return self.err("expected `.param`");
            }
            let mut align = None;
            let mut elem = None;
            let name = loop {
                let word = self.ident()?;
                if word == ".align" {
                    align = Some(self.int()? as u32);
                } else if let Some(size) = type_size(&word) {
                    elem = Some(size);
                } else if word.starts_with(".ptr") || word == ".global" || word == ".shared" {
                    // `.ptr .global .align 16` qualifiers of pointer parameters.
                } else if word.starts_with('.') {
                    return self.err(format!("unsupported parameter qualifier `{word}`"));
                } else {
                    break word;
                }
            };
            let elem = match elem {
                Some(e) => e,
                None => return self.err(format!("parameter `{name}` has no type")),
            };
            let mut size = elem;
            while self.eat_punct('[') {
                size *= self.int()?;
                self.expect_punct(']')?;
            }
            params.push(ParamDecl { name, size, align: align.unwrap_or(elem as u32) });
            self.eat_punct(',');
        }
        Ok(params)
    }

    fn body(&mut self) -> Result<Vec<Stmt>, ParseError> {
        self.expect_punct('{')?;
        let mut depth = 1;
        let mut stmts = Vec::new();
        while depth > 0 {
            match self.peek().cloned() {
                None => return self.err("unterminated function body"),
                Some(Tok::Punct('{')) => {
                    self.pos += 1;
                    depth += 1;
                    stmts.push(Stmt::Open);
                }
                Some(Tok::Punct('}')) => {
                    self.pos += 1;
                    depth -= 1;
                    if depth > 0 {
                        stmts.push(Stmt::Close);
                    }
                }
                Some(Tok::Ident(word)) if word == ".reg" => {
                    self.pos += 1;
                    stmts.push(self.reg_decl()?);
                }
                Some(Tok::Ident(word)) if word == ".local" || word == ".shared" => {
                    stmts.push(Stmt::Var(self.var_decl(false)?));
                }
                Some(Tok::Ident(word)) if word == ".pragma" => self.skip_statement()?,
                Some(Tok::Ident(word))
                    if self.tokens.get(self.pos + 1).map(|t| &t.tok) == Some(&Tok::Punct(':')) =>
                {
                    self.pos += 2;
                    stmts.push(Stmt::Label(word));
                }
                Some(_) => stmts.push(Stmt::Instr(self.instruction()?)),
            }
        }
        Ok(stmts)
    }

    fn reg_decl(&mut self) -> Result<Stmt, ParseError> {
        let line = self.line();
        let mut ty = self.ident()?;
        if ty == ".v2" || ty == ".v4" {
            return self.err("vector register declarations are not supported");
        }
        if ty == ".align" {
            self.int()?;
            ty = self.ident()?;
        }
        let mut names = Vec::new();
        loop {
            let name = self.ident()?;
            let count = if self.eat_punct('<') {
                let n = self.int()? as u32;
                self.expect_punct('>')?;
                Some(n)
            } else {
                None
            };
            names.push((name, count));
            if !self.eat_punct(',') {
                break;
            }
        }
        self.expect_punct(';')?;
        Ok(Stmt::Reg { ty, names, line })
    }

    fn instruction(&mut self) -> Result<InstrAst, ParseError> {
        let first = self.pos;
        let line = self.line();
        let guard = if self.eat_punct('@') {
            let negated = self.eat_punct('!');
            Some((self.ident()?, negated))
        } else {
            None
        };
        let opcode = self.ident()?;
        let line = if guard.is_some() { self.tokens[self.pos - 1].line } else { line };
        let mut operands = Vec::new();
        if !self.eat_punct(';') {
            loop {
                operands.push(self.operand()?);
                if self.eat_punct(';') {
                    break;
                }
                self.expect_punct(',')?;
            }
        }
        let (start, end) = (self.tokens[first].start, self.tokens[self.pos - 1].end);
        let text = self.src[start..end].split_whitespace().collect::<Vec<_>>().join(" ");
        Ok(InstrAst { line, text, guard, opcode, operands })
    }

    fn signed_int(&mut self) -> Result<i128, ParseError> {
        let negative = self.eat_punct('-');
        let v = self.int()? as i128;
        Ok(if negative { -v } else { v })
    }

    fn operand(&mut self) -> Result<Operand, ParseError> {
        match self.peek().cloned() {
            Some(Tok::Punct('[')) => {
                self.pos += 1;
                let (mut base, mut offset) = (None, 0i64);
                if let Some(Tok::Ident(_)) = self.peek() {
                    let name = self.ident()?;
                    if self.eat_punct(',') {
                        let coords = self.operand()?;
                        self.expect_punct(']')?;
                        return Ok(Operand::Tensor { map: name, coords: Box::new(coords) });
                    }
                    base = Some(name);
                    if self.eat_punct('+') || self.is_punct('-') {
                        offset = self.signed_int()? as i64;
                    }
                } else {
                    offset = self.signed_int()? as i64;
                }
                self.expect_punct(']')?;
                Ok(Operand::Addr { base, offset })
            }
            Some(Tok::Punct('{')) => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    items.push(self.operand()?);
                    if self.eat_punct('}') {
                        break;
                    }
                    self.expect_punct(',')?;
                }
                Ok(Operand::Vec(items))
            }
            Some(Tok::Punct('!')) => {
                self.pos += 1;
                Ok(Operand::Not(self.ident()?))
            }
            Some(Tok::Punct('-')) => {
                self.pos += 1;
                match self.next()? {
                    Tok::Int(v) => Ok(Operand::Int(-(v as i128))),
                    Tok::F32(bits) => Ok(Operand::F32(bits ^ 0x8000_0000)),
                    Tok::F64(bits) => Ok(Operand::F64(bits ^ (1 << 63))),
                    other => self.err(format!("expected a number after `-`, found {other:?}")),
                }
            }
            Some(Tok::Int(v)) => {
                self.pos += 1;
                Ok(Operand::Int(v as i128))
            }
            Some(Tok::F32(bits)) => {
                self.pos += 1;
                Ok(Operand::F32(bits))
            }
            Some(Tok::F64(bits)) => {
                self.pos += 1;
                Ok(Operand::F64(bits))
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                if name == "_" {
                    if self.eat_punct('|') {
                        return Ok(Operand::Pair(name, self.ident()?));
                    }
                    return Ok(Operand::Sink);
                }
                if self.eat_punct('|') {
                    return Ok(Operand::Pair(name, self.ident()?));
                }
                Ok(Operand::Name(name))
            }
            other => self.err(format!("expected an operand, found {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
//
// Generated by LLVM NVPTX Back-End
//
.version 7.0
.target sm_80
.address_size 64

.extern .shared .align 16 .b8 dyn_smem[];
.shared .align 4 .b8 tile[256];

.visible .func f(
	.param .b64 f_param_0
)
.noreturn
{
	trap; exit;
}
.visible .entry k(
	.param .align 8 .b8 k_param_0[24]
)
.maxntid 256, 1, 1
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<4>;
	ld.param.b64 	%rd1, [k_param_0+16];
$L__BB0_1:
	// begin inline asm
	{ .reg .b64 g; cvta.to.global.u64 g, %rd1;
ld.global.v4.u32 {%r0, %r1, _, %r3}, [g]; }
	// end inline asm
	setp.lt.u32 %p0|%p1, %r0, -1;
	@!%p0 bra 	$L__BB0_1;
	ret;
}
"#;

    #[test]
    fn parses_a_module_with_the_shapes_llvm_emits() {
        let m = parse_module(SAMPLE).unwrap();
        assert_eq!(m.version, (7, 0));
        assert_eq!(m.target, ["sm_80"]);
        assert_eq!(m.vars.len(), 2);
        assert!(m.vars[0].is_extern && m.vars[0].size == 0 && m.vars[0].align == 16);
        assert_eq!((m.vars[1].size, m.vars[1].align), (256, 4));
        assert_eq!(m.functions.len(), 2);
        let k = &m.functions[1];
        assert!(k.is_entry);
        assert_eq!((k.params[0].size, k.params[0].align), (24, 8));
        assert_eq!(k.bounds, LaunchBounds { max_threads: Some(256), required_block: None });
        assert_eq!(m.functions[0].bounds, LaunchBounds::default());
        let body = k.body.as_ref().unwrap();
        let instrs: Vec<&InstrAst> = body
            .iter()
            .filter_map(|s| if let Stmt::Instr(i) = s { Some(i) } else { None })
            .collect();
        assert_eq!(instrs[0].opcode, "ld.param.b64");
        assert_eq!(
            instrs[0].operands[1],
            Operand::Addr { base: Some("k_param_0".into()), offset: 16 }
        );
        assert_eq!(instrs[2].text, "ld.global.v4.u32 {%r0, %r1, _, %r3}, [g];");
        assert_eq!(instrs[2].line, 30);
        assert!(matches!(&instrs[2].operands[0], Operand::Vec(v) if v[2] == Operand::Sink));
        assert_eq!(instrs[3].operands[0], Operand::Pair("%p0".into(), "%p1".into()));
        assert_eq!(instrs[3].operands[2], Operand::Int(-1));
        assert_eq!(instrs[4].guard, Some(("%p0".into(), true)));
        assert!(body.iter().any(|s| matches!(s, Stmt::Label(l) if l == "$L__BB0_1")));
    }

    #[test]
    fn reports_the_line_of_a_syntax_error() {
        let err =
            parse_module(".version 7.0\n.target sm_80\n.entry k()\n{\n add.s32 %r1 %r2;\n}\n")
                .unwrap_err();
        assert_eq!(err.line, 5, "{err}");
    }
}
