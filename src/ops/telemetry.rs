//! Log output: JSON lines in containers, readable text on a terminal.
//!
//! One filter for the whole subscriber (a global filter, not a per-layer
//! one): tracing-subscriber's per-layer filters keep a thread-local "this
//! layer disabled the event" mark that only the event itself clears, and a
//! `log` record asked about and then not emitted (sqlx asks before logging a
//! Postgres notice; reqwest, rustls and others through the `log` bridge)
//! never comes to clear it, so the next event on that thread was dropped: a
//! fatal error after the migrations' "already exists" notice, and line after
//! line of a crawl with `RUST_LOG=info,crawlfleet=debug`.

use tracing::{Level, Metadata, Subscriber, level_filters::LevelFilter, subscriber::Interest};
use tracing_subscriber::{
    EnvFilter, Layer,
    filter::Targets,
    fmt::{self, MakeWriter},
    layer::Context,
    prelude::*,
    registry::LookupSpan,
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

/// Crates that write a line per character or token of every page they parse
/// (html5ever's tokenizer at `trace`, its tree builder at `debug`): at those
/// levels a worker spends minutes writing out one large page and its stuck
/// timeout ends the crawl, and the lines hold whatever the page reflects. They
/// stay at `info` whatever `RUST_LOG` says, like [`SECRET_BEARING`].
const PER_CHARACTER: &[&str] = &["html5ever", "markup5ever"];

/// Levels when `RUST_LOG` is not set.
const DEFAULT_DIRECTIVES: &str = "info,tower_http=warn,sqlx=warn,apalis=warn,apalis_redis=warn";

/// The cap on [`SECRET_BEARING`] and [`PER_CHARACTER`] crates; everything
/// else as `RUST_LOG` says.
fn capped() -> Targets {
    Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_targets(
            SECRET_BEARING
                .iter()
                .chain(PER_CHARACTER)
                .map(|t| (*t, LevelFilter::INFO)),
        )
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (containers).
    Json,
    /// Human-readable (terminals).
    Pretty,
}

/// Which events are written: `RUST_LOG`'s directives within the cap on
/// secret-bearing and per-character crates, and every `ERROR` event whatever `RUST_LOG` says
/// (`RUST_LOG=off` or `crawlfleet=warn` must not hide why a process stopped).
struct LogFilter {
    directives: EnvFilter,
    cap: Targets,
}

impl LogFilter {
    fn always_written(meta: &Metadata<'_>) -> bool {
        meta.is_event() && *meta.level() == Level::ERROR
    }

    fn within_cap(&self, meta: &Metadata<'_>) -> bool {
        self.cap.would_enable(meta.target(), meta.level())
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for LogFilter {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if Self::always_written(meta) {
            return Interest::always();
        }
        if !self.within_cap(meta) {
            return Interest::never();
        }
        Layer::<S>::register_callsite(&self.directives, meta)
    }

    fn enabled(&self, meta: &Metadata<'_>, cx: Context<'_, S>) -> bool {
        Self::always_written(meta)
            || (self.within_cap(meta) && Layer::<S>::enabled(&self.directives, meta, cx))
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        let directives = Layer::<S>::max_level_hint(&self.directives).unwrap_or(LevelFilter::TRACE);
        Some(directives.max(LevelFilter::ERROR))
    }

    // Span-scoped directives (`RUST_LOG=[crawl{run_id=7}]=debug`) need to
    // see the spans.
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        cx: Context<'_, S>,
    ) {
        Layer::<S>::on_new_span(&self.directives, attrs, id, cx)
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        cx: Context<'_, S>,
    ) {
        Layer::<S>::on_record(&self.directives, id, values, cx)
    }

    fn on_enter(&self, id: &tracing::span::Id, cx: Context<'_, S>) {
        Layer::<S>::on_enter(&self.directives, id, cx)
    }

    fn on_exit(&self, id: &tracing::span::Id, cx: Context<'_, S>) {
        Layer::<S>::on_exit(&self.directives, id, cx)
    }

    fn on_close(&self, id: tracing::span::Id, cx: Context<'_, S>) {
        Layer::<S>::on_close(&self.directives, id, cx)
    }
}

/// The subscriber: `directives` (within the cap, errors always), written by
/// `writer` in `format`.
fn subscriber<W>(
    format: LogFormat,
    directives: EnvFilter,
    writer: W,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filtered = tracing_subscriber::registry().with(LogFilter {
        directives,
        cap: capped(),
    });
    match format {
        LogFormat::Json => {
            Box::new(filtered.with(fmt::layer().json().flatten_event(true).with_writer(writer)))
        }
        LogFormat::Pretty => Box::new(filtered.with(fmt::layer().compact().with_writer(writer))),
    }
}

/// Installs the global subscriber (on stdout) and the panic hook; `RUST_LOG`
/// overrides the default levels, within the cap on secret-bearing and per-character crates,
/// and errors are written whatever it says.
pub fn init(format: LogFormat) {
    init_on(format, std::io::stdout);
}

/// [`init`], the log written on stderr: for a program whose stdout speaks to
/// the process that started it (`crawlfleet-demo` tells the fleet it is ready).
pub fn init_on_stderr(format: LogFormat) {
    init_on(format, std::io::stderr);
}

fn init_on<W>(format: LogFormat, writer: W)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let (directives, unreadable) = match std::env::var("RUST_LOG") {
        Err(_) => (EnvFilter::new(DEFAULT_DIRECTIVES), None),
        Ok(value) => match EnvFilter::try_new(&value) {
            Ok(directives) => (directives, None),
            Err(e) => (EnvFilter::new(DEFAULT_DIRECTIVES), Some(e)),
        },
    };
    subscriber(format, directives, writer).init();
    if let Some(e) = unreadable {
        tracing::warn!(error = %e, "RUST_LOG unreadable; logging at the default levels");
    }
    log_panics();
}

/// A panic is written to the log as an error too (the default hook, kept,
/// writes it on stderr only), so a task that dies is seen where the logs go.
fn log_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        tracing::error!(panic = %info, "panicked");
        previous(info);
    }));
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing::callsite::Callsite as _;

    use super::*;

    #[test]
    fn secret_bearing_and_per_character_crates_stay_at_info_and_others_follow_rust_log() {
        let capped = capped();
        let enabled = |target: &str, level: tracing::Level| capped.would_enable(target, &level);
        assert!(!enabled(
            "crawlfleet::worker::browser::devtools",
            tracing::Level::DEBUG
        ));
        assert!(!enabled("hyper_util::client", tracing::Level::TRACE));
        assert!(!enabled("aws_sigv4::http_request", tracing::Level::DEBUG));
        assert!(!enabled("html5ever::tokenizer", tracing::Level::TRACE));
        assert!(!enabled("html5ever::tree_builder", tracing::Level::DEBUG));
        assert!(enabled(
            "crawlfleet::worker::browser::devtools",
            tracing::Level::INFO
        ));
        assert!(enabled("crawlfleet::worker", tracing::Level::TRACE));
    }

    /// The log lines written, for a test.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Captured {
        type Writer = Captured;
        fn make_writer(&'w self) -> Captured {
            self.clone()
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    /// Emits what a process emits: a `log` record asked about and dropped
    /// (the `log` bridge asks the subscriber directly, as sqlx does before a
    /// Postgres notice), then our own lines.
    fn emit_after_a_dropped_log_record(directives: &str) -> String {
        let captured = Captured::default();
        let dispatch = tracing::Dispatch::new(subscriber(
            LogFormat::Json,
            EnvFilter::new(directives),
            captured.clone(),
        ));
        tracing::dispatcher::with_default(&dispatch, || {
            let notice = tracing::callsite!(
                name: "notice",
                kind: tracing::metadata::Kind::EVENT,
                target: "sqlx::postgres::notice",
                level: Level::INFO,
                fields: message
            );
            // What the `log` bridge does: asks, and emits nothing when told no.
            let _ = dispatch.enabled(notice.metadata());
            tracing::error!(target: "crawlfleet", "stopped with an error");
            tracing::info!(target: "crawlfleet::worker::crawl", "crawl started");
            tracing::debug!(target: "crawlfleet::worker::crawl", "page read");
        });
        captured.text()
    }

    #[test]
    fn a_log_record_that_is_asked_about_and_dropped_silences_nothing_after_it() {
        let text = emit_after_a_dropped_log_record("info,sqlx=warn");
        assert!(text.contains("stopped with an error"), "{text}");
        assert!(text.contains("crawl started"), "{text}");
        assert!(!text.contains("page read"), "{text}");
        let text = emit_after_a_dropped_log_record("info,sqlx=warn,crawlfleet=debug");
        assert!(text.contains("stopped with an error"), "{text}");
        assert!(text.contains("crawl started"), "{text}");
        assert!(text.contains("page read"), "{text}");
    }

    #[test]
    fn errors_are_written_whatever_rust_log_says() {
        for directives in ["off", "crawlfleet=off", "warn,crawlfleet=off", "sqlx=warn"] {
            let text = emit_after_a_dropped_log_record(directives);
            assert!(
                text.contains("stopped with an error"),
                "{directives}: {text}"
            );
            assert!(!text.contains("page read"), "{directives}: {text}");
        }
    }
}
