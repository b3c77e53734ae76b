//! SIGTERM (ECS, compose, systemd) and Ctrl-C both start a graceful stop.

use tokio_util::sync::CancellationToken;

/// Cancels `token` on the first SIGTERM or SIGINT.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received; stopping"),
            _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C received; stopping"),
        }
        token.cancel();
    });
}
