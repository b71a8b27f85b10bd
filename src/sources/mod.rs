//! Sources: where transcript bytes come from. `batch` for the verbs over whole files.

pub mod batch;
