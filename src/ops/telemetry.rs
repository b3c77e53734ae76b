//! Log output: JSON lines in containers, readable text on a terminal.

use tracing::level_filters::LevelFilter;
use tracing_subscriber::{
    EnvFilter, Layer,
    filter::{FilterExt, Targets},
    fmt,
    prelude::*,
};

/// Crates whose debug and trace output can carry what a crawl must keep
/// secret: cookies and local storage going to and from Chrome (DevTools
/// messages), request and response headers (a site's `Authorization`, a
/// proxy's credentials, `Set-Cookie`), AWS request signing. They stay at
/// `info` whatever `RUST_LOG` says.
const SECRET_BEARING: &[&str] = &[
    "crawlfleet::worker::browser::devtools",
    "hyper",
    "hyper_util",
    "reqwest",
    "h2",
    "rustls",
    "tungstenite",
    "tokio_tungstenite",
    "cookie_store",
    "aws_config",
    "aws_runtime",
    "aws_sigv4",
    "aws_smithy_runtime",
    "aws_smithy_http_client",
    "aws_sdk_cloudwatch",
];

/// The cap on [`SECRET_BEARING`] crates; everything else as `RUST_LOG` says.
fn secrets_capped() -> Targets {
    Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_targets(SECRET_BEARING.iter().map(|t| (*t, LevelFilter::INFO)))
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (containers).
    Json,
    /// Human-readable (terminals).
    Pretty,
}

/// Installs the global subscriber; `RUST_LOG` overrides the default levels,
/// within the cap on secret-bearing crates.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new("info,tower_http=warn,sqlx=warn,apalis=warn,apalis_redis=warn")
    });
    let filter = filter.and(secrets_capped());
    let registry = tracing_subscriber::registry();
    match format {
        LogFormat::Json => registry
            .with(fmt::layer().json().flatten_event(true).with_filter(filter))
            .init(),
        LogFormat::Pretty => registry
            .with(fmt::layer().compact().with_filter(filter))
            .init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_bearing_crates_stay_at_info_and_others_follow_rust_log() {
        let capped = secrets_capped();
        let enabled = |target: &str, level: tracing::Level| capped.would_enable(target, &level);
        assert!(!enabled(
            "crawlfleet::worker::browser::devtools",
            tracing::Level::DEBUG
        ));
        assert!(!enabled("hyper_util::client", tracing::Level::TRACE));
        assert!(!enabled("aws_sigv4::http_request", tracing::Level::DEBUG));
        assert!(enabled(
            "crawlfleet::worker::browser::devtools",
            tracing::Level::INFO
        ));
        assert!(enabled("crawlfleet::worker", tracing::Level::TRACE));
    }
}
