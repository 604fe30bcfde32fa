//! End-to-end tests of the trainer on files the tests write themselves: llm.c-format
//! checkpoints and shards, the `trainer` binary's commands, its error messages, bit-exact
//! resume, and agreement with an independent f64 model of llm.c's CPU trainer.

mod commands;
mod common;
mod errors;
mod ladder;
mod llmc_f64;
mod reference;
mod resume;
mod sim;
