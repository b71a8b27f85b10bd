//! The one integration test binary: data-driven rules, real transcripts, generated corpora,
//! the CLI contract, the architecture guard, the deploy/ files against the code, the context,
//! history and orphans stages with the reverse-paged reader, sessions over real directory
//! trees, concurrent appends, and the report verb in a real browser.

mod advisories;
mod append;
mod architecture;
mod browser;
mod chunking;
mod cli;
mod collectors;
mod context;
mod daemon;
mod daemon_faults;
mod datasets;
mod deploy;
mod framing;
mod generated;
mod harness;
mod hostile;
mod http_sink;
mod invariants;
mod machine_faults;
mod mutate;
mod mutation;
mod oracle;
mod orphans;
mod pipeline;
mod powerloss;
mod read_ahead;
mod docs;
mod real;
mod receiver;
mod reliability;
mod repair;
mod report;
mod reverse;
mod rules;
mod safety;
mod sessions;
mod stallfs;
mod support;
mod tap;
mod threads;
mod top;
mod usage;
mod ux;
