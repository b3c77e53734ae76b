//! What operators see and drive: Prometheus metrics, logs, signals and the
//! container probe. Imports `domain` only; every room may import it.

pub mod healthcheck;
pub mod metrics;
pub mod shutdown;
pub mod telemetry;
