//! placeholder
mod decode;
mod device;
mod exec;
mod memory;
mod parse;
mod racecheck;

pub use device::{MAX_SHARED_PER_BLOCK, SimBuffer, SimOptions, Simulator};
