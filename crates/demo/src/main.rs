//! `crawlfleet-demo`: the demo shop as a program. `crawlfleet --demo` runs it
//! with the fleet's own arguments (and environment), so it reads the same
//! configuration: `DEMO_PORT`, the database, `ALLOW_PRIVATE_TARGETS`,
//! `SESSION_KEY`. Run alone it serves until Ctrl-C.

use std::process::ExitCode;

use clap::Parser;
use crawlfleet::{
    config::Config,
    ops::{
        exit::{Stop, StopKind},
        shutdown, telemetry,
    },
};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::parse();
    // stdout carries the one line the fleet waits for.
    telemetry::init_on_stderr(config.common.log_format);
    let config = match config.resolve() {
        Ok(config) => config,
        Err(e) => return Stop::new(StopKind::Config, e).report(),
    };
    let stop = CancellationToken::new();
    shutdown::cancel_on_signal(stop.clone());
    match crawlfleet_demo::serve::run(&config, stop).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(stop) => stop.report(),
    }
}
