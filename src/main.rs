//! The `transcriptd` binary: parse the command line, run the verb, map the outcome to an exit
//! code (0 clean, 1 findings, 2 usage or IO error).

use std::process::ExitCode;

fn main() -> ExitCode {
    transcriptd::cli::main()
}
