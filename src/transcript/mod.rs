//! The pure core: transcript lines in, canonical entries, findings and plans out.
//!
//! *Boundary:* nothing in this module does IO, reads a clock or knows a path. Shells (the CLI
//! verbs, the daemon) own files, time and threads of control, and feed bytes in. A test
//! (`tests/architecture.rs`) fails if this rule is broken.

pub mod canonical;
pub mod check;
pub mod checker;
pub mod context;
pub mod dataset;
pub mod explain;
pub mod filter;
pub mod finding;
pub mod formats;
pub mod forward;
pub mod lines;
pub mod model;
pub mod pairing;
pub mod pipeline;
pub mod pricing;
pub mod progress;
pub mod repair;
pub mod repair_run;
pub mod reverse;
pub mod scan;
pub mod stages;
pub mod timestamp;
pub mod verdict;

pub use check::check_bytes;
pub use checker::{Checked, Checker, Observer, Options, Stats, StrictStop};
pub use filter::FindingFilter;
pub use finding::{Finding, Kind, Output, Severity};
pub use formats::Format;
pub use pipeline::{Event, Inputs, Pipeline, Stage};
pub use progress::Progress;

/// Hash maps and sets keyed by ids from the transcript (call ids, uuids), hashed with xxh3:
/// SipHash showed per line in profiles, and the keys come from the user's own files, not from a
/// peer that could flood the table. The builder is xxh3's default (seed 0, its own secret): a
/// zero-sized one, where `Xxh3Builder` carries room for a 192-byte secret in every table and
/// copies it for every hash.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, xxhash_rust::xxh3::Xxh3DefaultBuilder>;
/// See [`Map`].
pub(crate) type Set<K> = std::collections::HashSet<K, xxhash_rust::xxh3::Xxh3DefaultBuilder>;
