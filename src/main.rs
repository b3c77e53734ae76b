use clap::Parser;
use crawlfleet::{
    app, config::Config, migrate, ops::healthcheck, ops::shutdown, ops::telemetry, simulate,
};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // `crawlfleet healthcheck --url ...`: the containers' probe, no curl needed.
    if std::env::args().nth(1).as_deref() == Some("healthcheck") {
        let args = healthcheck::Args::parse_from(std::env::args().skip(1));
        return healthcheck::run(&args).await;
    }
    // `crawlfleet simulate ...`: the fleet simulator, no stores needed.
    if std::env::args().nth(1).as_deref() == Some("simulate") {
        let args = simulate::Args::parse_from(std::env::args().skip(1));
        return simulate::run(&args);
    }
    // `crawlfleet migrate [--check]`: the schema, as its own deploy step.
    if std::env::args().nth(1).as_deref() == Some("migrate") {
        let args = migrate::Args::parse_from(std::env::args().skip(1));
        return migrate::run(&args).await;
    }
    let config = match Config::parse().resolve() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("crawlfleet: {e:#}");
            return std::process::ExitCode::from(2);
        }
    };
    telemetry::init(config.common.log_format);
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
