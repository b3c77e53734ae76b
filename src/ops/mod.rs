//! What operators see and drive: Prometheus metrics, CloudWatch puts, logs,
//! signals and the container probe. Imports `domain` only; every room may import it.

pub mod cloudwatch;
pub mod exit;
pub mod healthcheck;
pub mod metrics;
pub mod process_tree;
pub mod shutdown;
pub mod telemetry;
pub mod tls;
