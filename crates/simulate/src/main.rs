//! `crawlfleet-simulate`: the fleet simulator on its own. `crawlfleet simulate
//! ARGS` runs this binary with ARGS (and `simulate` as its name, so clap's
//! usage lines read as they always did).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    crawlfleet_simulate::run(&crawlfleet_simulate::Args::parse())
}
