//! The pure core: transcript lines in, canonical entries, findings and plans out.
//!
//! *Boundary:* nothing in this module does IO, reads a clock or knows a path. Shells (the CLI
//! verbs, the daemon) own files, time and threads of control, and feed bytes in. A test
//! (`tests/architecture.rs`) fails if this rule is broken.

pub mod canonical;
pub mod checker;
pub mod filter;
pub mod finding;
pub mod formats;
pub mod forward;
pub mod lines;
pub mod model;
pub mod pipeline;
pub mod progress;
pub mod reverse;
pub mod scan;
pub mod stages;

pub use checker::{check_bytes, Checker, Finished, Observer, Options, Stats, StrictStop};
pub use filter::FindingFilter;
pub use finding::{Finding, Kind, Output, Severity};
pub use formats::Format;
pub use pipeline::{Event, Inputs, Pipeline, Stage};
pub use progress::Progress;
