//! The simulator's own tests, one binary: instruction families on hand-computed values,
//! the execution model, planted bugs, the memory-access profile, the Hopper asynchronous
//! instructions, and the project's PTX.

mod common;
mod control;
mod cvt;
mod float;
mod hopper;
mod int;
mod memory;
mod mma;
mod planted_bugs;
mod profile;
mod project;
mod warp;
