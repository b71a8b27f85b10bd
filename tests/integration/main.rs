//! The one integration test binary: data-driven rules, real transcripts, generated corpora,
//! the CLI contract, the architecture guard and the deploy/ files against the code.

mod architecture;
mod chunking;
mod cli;
mod daemon;
mod deploy;
mod generated;
mod real;
mod repair;
mod rules;
mod support;
