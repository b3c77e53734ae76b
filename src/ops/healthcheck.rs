//! `crawlfleet healthcheck`: exits 0 when a process's `/health` answers 2xx,
//! 1 otherwise. Container healthchecks use it (the image has no curl).

use std::{process::ExitCode, time::Duration};

use clap::Parser;

/// Probe a crawlfleet process's health endpoint.
#[derive(Debug, Parser)]
#[command(name = "crawlfleet healthcheck")]
pub struct Args {
    /// The health URL: api :3000, scheduler :3002, worker :3001 (METRICS_PORT).
    #[arg(long, default_value = "http://127.0.0.1:3000/health")]
    pub url: String,

    /// Give up after this many seconds.
    #[arg(long, default_value_t = 3)]
    pub timeout_secs: u64,
}

pub async fn run(args: &Args) -> ExitCode {
    let client = reqwest::Client::new();
    let answer = client
        .get(&args.url)
        .timeout(Duration::from_secs(args.timeout_secs))
        .send()
        .await;
    match answer {
        Ok(response) if response.status().is_success() => ExitCode::SUCCESS,
        Ok(response) => {
            eprintln!("unhealthy: {} answered {}", args.url, response.status());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("unhealthy: {}: {e}", args.url);
            ExitCode::FAILURE
        }
    }
}
