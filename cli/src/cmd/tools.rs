//! `nib tools`: the MCP tools this nib serves, one line each.

use std::process::ExitCode;

pub(crate) fn run() -> anyhow::Result<ExitCode> {
    for t in nib::tools::catalog() {
        println!("{}\t{}\t{}", t.name, t.scope, t.title);
    }
    Ok(ExitCode::SUCCESS)
}
