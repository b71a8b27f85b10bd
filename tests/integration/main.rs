//! The one integration test binary, grouped by area as ripgrep's `tests/tests.rs` is, with the
//! helpers apart in `support/` (paths, fixtures and expectation files; the daemon harness; the
//! http receiver; the browser; the structured mutator the fuzz targets share). Test peers that
//! run as other processes (fake providers, FUSE filesystems, receivers) are in `peers/`; the
//! corpus generators in `tests/gen/`.

mod support;

// Reading: framing, the scanner's rules, detection, and the check pipeline against ground truth.
mod chunking;
mod framing;
mod generated;
mod pipeline;
mod read_ahead;
mod real;
mod rules;
mod threads;

// What the model sees: context, history, the reverse-paged reader, orphans.
mod context;
mod orphans;
mod reverse;

// Repair: its promises, fuzz-shared invariants and mutations, hostile trees, power loss.
mod invariants;
mod mutation;
mod powerloss;
mod repair;
mod safety;

// Datasets and batch files.
mod datasets;

// The real agents as the oracle.
mod oracle;
// The real Copilot CLI as the oracle of its format.
mod oracle_copilot;
mod oracle_hooks;

// The daemon: tailing, faults of files and machines, exactly-once, sinks and collectors, the
// listener and its clients.
mod append;
mod collectors;
mod daemon;
mod daemon_faults;
mod hooks;
mod http_sink;
mod loss;
mod machine_faults;
mod reliability;
mod reload;
mod snapshot;
mod stallfs;
mod tap;
mod top;

// The command line and what users read: verbs, output, sessions, usage, the report, hostile
// text, the docs against the binary.
mod cli;
mod docs;
mod doctor;
mod explain;
mod hostile;
mod report;
mod sessions;
mod usage;
mod ux;

// The house: the import graph, advisories, deploy/ against the code, the packages installed.
mod advisories;
mod architecture;
mod deploy;
mod packaging;
