use clap::Parser;
use crawlfleet::{
    app,
    config::Config,
    migrate,
    ops::exit::{Stop, StopKind},
    ops::healthcheck,
    ops::shutdown,
    ops::telemetry,
    smoke, tools,
};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // `crawlfleet healthcheck --url ...`: the containers' probe, no curl needed.
    if std::env::args().nth(1).as_deref() == Some("healthcheck") {
        let args = healthcheck::Args::parse_from(std::env::args().skip(1));
        return healthcheck::run(&args).await;
    }
    // `crawlfleet simulate ...`: the fleet simulator, a program of its own.
    if std::env::args().nth(1).as_deref() == Some("simulate") {
        return tools::simulate(std::env::args_os().skip(2));
    }
    // `crawlfleet migrate [--check]`: the schema, as its own deploy step.
    if std::env::args().nth(1).as_deref() == Some("migrate") {
        let args = migrate::Args::parse_from(std::env::args().skip(1));
        return migrate::run(&args).await;
    }
    // `crawlfleet smoke`: whether a worker with these settings can work.
    if std::env::args().nth(1).as_deref() == Some("smoke") {
        let args = smoke::Args::parse_from(std::env::args().skip(1));
        return smoke::run(args).await;
    }
    let config = match Config::try_parse() {
        Ok(config) => config,
        // --help and --version print and exit 0; a flag or value clap
        // refuses stops with its first line (and exit code 2) like any
        // other setting at fault.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            telemetry::init(log_format_from_env());
            return Stop::new(StopKind::Config, anyhow::anyhow!(clap_cause(&e))).report();
        }
    };
    telemetry::init(config.common.log_format);
    let config = match config.resolve() {
        Ok(config) => config,
        Err(e) => return Stop::new(StopKind::Config, e).report(),
    };
    let token = CancellationToken::new();
    shutdown::cancel_on_signal(token.clone());
    match app::run(config, token).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(stop) => stop.report(),
    }
}

/// `LOG_FORMAT` when the command line could not be parsed: the log should
/// still be JSON where the containers ask for JSON.
fn log_format_from_env() -> telemetry::LogFormat {
    match std::env::var("LOG_FORMAT").as_deref() {
        Ok("json") => telemetry::LogFormat::Json,
        _ => telemetry::LogFormat::Pretty,
    }
}

/// clap's message, first line, without its `error: ` prefix.
fn clap_cause(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let first = rendered
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    first.trim_start_matches("error: ").trim().to_owned()
}
