//! The pairing rules: which call a result answers, when a call is left open, which lines a
//! rewind abandons, which thread a line belongs to. Below the pipeline: the runner pairs every
//! line once ([`super::pipeline::Pairing`]) and the stages read what it found.

pub mod api;
pub mod branches;
pub mod threads;
pub mod validator;
