//! The one integration test binary: data-driven rules, real transcripts, generated corpora,
//! the CLI contract and the architecture guard.

mod architecture;
mod chunking;
mod cli;
mod context;
mod generated;
mod real;
mod reverse;
mod rules;
mod support;
