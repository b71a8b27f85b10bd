//! The one integration test binary: data-driven rules, real transcripts, generated corpora,
//! the CLI contract, the architecture guard, sessions over real directory trees, and
//! concurrent appends.

mod append;
mod architecture;
mod chunking;
mod cli;
mod generated;
mod real;
mod rules;
mod sessions;
mod support;
