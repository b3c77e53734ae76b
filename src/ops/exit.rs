//! How a process stops when it must: an exit code per kind of failure (so a
//! supervisor or a script can tell a taken port from an unreachable Redis
//! without reading logs), one line on stderr saying why, and the same as an
//! error in the log (JSON in containers), whatever `RUST_LOG` says.

use std::process::ExitCode;

use crate::domain::text_enum::text_enum;

text_enum! {
    /// Why a process stopped; each kind has its own exit code (README, "Exit codes").
    pub enum StopKind as "stop kind" {
        /// Anything else: a role failed while running, or an unexpected error. Exit 1.
        Failed = "failed",
        /// A setting is missing, malformed or contradicts another. Exit 2.
        Config = "config",
        /// Postgres did not answer within the start-up wait (`DATABASE_WAIT_SECS`). Exit 3.
        DatabaseUnreachable = "database_unreachable",
        /// Redis did not answer. Exit 4.
        RedisUnreachable = "redis_unreachable",
        /// A port this process must listen on is held by another program. Exit 5.
        PortTaken = "port_taken",
        /// The schema could not be brought up to this binary's. Exit 6.
        MigrationFailed = "migration_failed",
    }
}

impl StopKind {
    pub fn exit_code(self) -> u8 {
        match self {
            StopKind::Failed => 1,
            StopKind::Config => 2,
            StopKind::DatabaseUnreachable => 3,
            StopKind::RedisUnreachable => 4,
            StopKind::PortTaken => 5,
            StopKind::MigrationFailed => 6,
        }
    }

    /// What an operator can do about it, when there is one thing to say.
    fn hint(self) -> Option<&'static str> {
        match self {
            StopKind::PortTaken => {
                Some("another program listens there: stop it or choose another port")
            }
            StopKind::DatabaseUnreachable => Some("is Postgres running and DATABASE_URL right?"),
            StopKind::RedisUnreachable => Some("is Redis running and REDIS_URL right?"),
            _ => None,
        }
    }
}

/// A failure that stops the process, with its kind.
#[derive(Debug)]
pub struct Stop {
    pub kind: StopKind,
    pub error: anyhow::Error,
}

impl Stop {
    pub fn new(kind: StopKind, error: impl Into<anyhow::Error>) -> Self {
        Stop {
            kind,
            error: error.into(),
        }
    }

    /// A failure of unknown kind: a taken port is recognised by its I/O error
    /// wherever it came from (the api, a side port, the demo shop).
    pub fn classify(error: anyhow::Error) -> Self {
        let kind = if is_port_taken(&error) {
            StopKind::PortTaken
        } else {
            StopKind::Failed
        };
        Stop { kind, error }
    }

    /// The cause on one line.
    pub fn cause(&self) -> String {
        let cause = one_line(&self.error);
        match self.kind.hint() {
            Some(hint) => format!("{cause} ({hint})"),
            None => cause,
        }
    }

    /// Writes why the process stops (a line on stderr, an error in the log)
    /// and gives its exit code.
    pub fn report(&self) -> ExitCode {
        let cause = self.cause();
        tracing::error!(
            kind = self.kind.as_str(),
            exit_code = self.kind.exit_code(),
            error = %cause,
            "crawlfleet stopped"
        );
        eprintln!("crawlfleet: {}: {cause}", self.kind);
        ExitCode::from(self.kind.exit_code())
    }
}

/// Converts any error into a [`Stop`] of `kind`, at the step that knows it.
pub trait StopContext<T> {
    fn stop_as(self, kind: StopKind) -> Result<T, Stop>;
}

impl<T, E: Into<anyhow::Error>> StopContext<T> for Result<T, E> {
    fn stop_as(self, kind: StopKind) -> Result<T, Stop> {
        self.map_err(|e| Stop::new(kind, e))
    }
}

fn is_port_taken(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::AddrInUse)
    })
}

/// An error and its causes on one line, `outer: inner: innermost`, a cause
/// that repeats the one before it said once.
pub fn one_line(error: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = cause
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if parts.last().is_some_and(|last| last.ends_with(&text)) || text.is_empty() {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn exit_codes_are_distinct_and_in_order() {
        for (i, kind) in StopKind::ALL.iter().enumerate() {
            assert_eq!(kind.exit_code() as usize, i + 1, "{kind}");
        }
    }

    #[test]
    fn a_cause_is_one_line_without_repeats() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused\nreally");
        let error = Err::<(), _>(io).context("connecting to Redis").unwrap_err();
        assert_eq!(one_line(&error), "connecting to Redis: refused really");
        let twice = anyhow::Error::msg("Connection refused (os error 111)")
            .context("Connection refused (os error 111)")
            .context("connecting to Redis");
        assert_eq!(
            one_line(&twice),
            "connecting to Redis: Connection refused (os error 111)"
        );
    }

    #[test]
    fn a_taken_port_is_recognised_through_its_context() {
        let io = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let error = Err::<(), _>(io)
            .context("binding the api to 127.0.0.1:3000")
            .context("api")
            .unwrap_err();
        let stop = Stop::classify(error);
        assert_eq!(stop.kind, StopKind::PortTaken);
        assert!(
            stop.cause()
                .starts_with("api: binding the api to 127.0.0.1:3000: ")
        );
        let other = Stop::classify(anyhow::anyhow!("a role stopped unexpectedly"));
        assert_eq!(other.kind, StopKind::Failed);
    }
}
