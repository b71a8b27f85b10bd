//! transcriptd: check, repair, tail and export metrics for the JSONL transcripts AI coding agents
//! write (Claude Code, OpenAI Codex CLI, OpenAI chat and Anthropic Messages logs).
//!
//! The crate is a pure core, [`transcript`], driven by two shells: the batch verbs in [`cli`] and
//! the daemon. [`sources`] and [`sessions`] find and read files, [`sinks`] write them; [`repair`]
//! is the repair driver both shells call. See ARCHITECTURE.md for the map.
//!
//! ```
//! use transcriptd::transcript::{check_bytes, Kind, Options};
//!
//! let input = br#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}]}
//! "#;
//! let (findings, _stats, _format) = check_bytes(input, Options::default()).unwrap();
//! assert_eq!(findings[0].kind, Kind::OrphanCall);
//! ```
#![warn(missing_docs)]

pub mod batch_check;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod error;
pub mod prices;
pub mod repair;
pub mod sessions;
pub mod sinks;
pub mod snapshots;
pub mod sources;
pub mod telemetry;
pub mod transcript;
