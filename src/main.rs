use clap::Parser;
use crawlfleet::{app, config::Config, shutdown, telemetry};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let config = Config::parse();
    telemetry::init(config.log_format);
    let token = CancellationToken::new();
    shutdown::cancel_on_signal(token.clone());
    match app::run(config, token).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = ?e, "crawlfleet stopped with an error");
            std::process::ExitCode::FAILURE
        }
    }
}
