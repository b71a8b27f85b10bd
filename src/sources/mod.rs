//! Sources: where transcript bytes come from. `batch` reads whole files forward for the verbs;
//! `reverse` reads a file backwards in pages from its end, for the compaction cuts.

pub mod batch;
pub mod reverse;
