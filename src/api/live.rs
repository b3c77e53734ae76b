//! `/ws`: live events for WebSocket clients. One send task and one receive
//! task per client under `select!`; each client reads from a bounded broadcast
//! receiver, so a slow client lags (and is told how much it missed) but never
//! blocks others or grows memory; a client that stops answering is dropped.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    extract::{
        State,
        ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade, close_code},
    },
    response::Response,
};
use futures::{SinkExt, StreamExt, stream::SplitSink};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{broadcast, watch};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;
use crate::{events::Event, metrics::metrics, store};

/// Timing of live connections.
#[derive(Debug, Clone, Copy)]
pub struct LiveSettings {
    pub ping_every: Duration,
    /// A client whose socket takes longer than this to accept one frame is dropped.
    pub send_timeout: Duration,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(upgrade))
}

/// Live events as JSON text frames: `run.updated`, `result.stored`,
/// `queue.stats` (every 5 s), `lagged`. Send `{"subscribe": {"keyword_id"?,
/// "site_id"?, "run_id"?}}` to filter. The token may be given as `?token=`.
#[utoipa::path(get, path = "/ws", tag = "live", security(("bearer" = [])),
    params(("token" = Option<String>, Query, description = "The bearer token, for browsers")),
    responses((status = 101, description = "Switching to the WebSocket protocol"), (status = 401, body = super::error::ErrorBody)))]
async fn upgrade(ws: WebSocketUpgrade, State(state): State<AppState>) -> Response {
    ws.on_upgrade(move |socket| serve_client(socket, state))
}

/// What a client subscribed to; empty fields match everything.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Filter {
    #[serde(skip_serializing_if = "Option::is_none")]
    keyword_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    site_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<i64>,
}

impl Filter {
    fn admits(&self, event: &Event) -> bool {
        match event.subject() {
            None => true,
            Some((run, keyword, site)) => {
                self.run_id.is_none_or(|id| id == run)
                    && self.keyword_id.is_none_or(|id| id == keyword)
                    && self.site_id.is_none_or(|id| id == site)
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientMessage {
    subscribe: Filter,
}

struct ClientGauge;
impl ClientGauge {
    fn new() -> Self {
        metrics().websocket_clients.inc();
        ClientGauge
    }
}
impl Drop for ClientGauge {
    fn drop(&mut self) {
        metrics().websocket_clients.dec();
    }
}

async fn serve_client(socket: WebSocket, state: AppState) {
    let _gauge = ClientGauge::new();
    let (sink, mut stream) = socket.split();
    let events = state.live.subscribe();
    let (filter_tx, filter_rx) = watch::channel(Filter::default());
    let started = Instant::now();
    // Milliseconds since `started` of the last frame the client sent.
    let last_heard = Arc::new(AtomicU64::new(0));

    let (reply_tx, reply_rx) = tokio::sync::mpsc::channel::<String>(8);
    let mut send = tokio::spawn(send_events(
        sink,
        events,
        filter_rx,
        reply_rx,
        state.clone(),
        started,
        last_heard.clone(),
    ));
    let mut receive = tokio::spawn(async move {
        while let Some(Ok(message)) = stream.next().await {
            last_heard.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
            let Message::Text(text) = message else {
                if matches!(message, Message::Close(_)) {
                    return;
                }
                continue;
            };
            let reply = match serde_json::from_str::<ClientMessage>(&text) {
                Ok(ClientMessage { subscribe }) => {
                    let reply = json!({"type": "subscribed", "filter": subscribe});
                    let _ = filter_tx.send(subscribe);
                    reply
                }
                Err(e) => {
                    json!({"type": "error", "message": format!("expected {{\"subscribe\": {{...}}}}: {e}")})
                }
            };
            if reply_tx.send(reply.to_string()).await.is_err() {
                return;
            }
        }
    });
    tokio::select! {
        _ = &mut send => receive.abort(),
        _ = &mut receive => send.abort(),
    }
}

async fn send_events(
    mut sink: SplitSink<WebSocket, Message>,
    mut events: broadcast::Receiver<Event>,
    filter: watch::Receiver<Filter>,
    mut replies: tokio::sync::mpsc::Receiver<String>,
    state: AppState,
    started: Instant,
    last_heard: Arc<AtomicU64>,
) {
    let settings = state.live_settings;
    let mut ping = tokio::time::interval_at(
        tokio::time::Instant::now() + settings.ping_every,
        settings.ping_every,
    );
    loop {
        let frame = tokio::select! {
            _ = state.shutdown.cancelled() => {
                let close = CloseFrame { code: close_code::AWAY, reason: Utf8Bytes::from_static("server shutting down") };
                let _ = tokio::time::timeout(settings.send_timeout, sink.send(Message::Close(Some(close)))).await;
                return;
            }
            reply = replies.recv() => match reply {
                Some(reply) => Message::Text(reply.into()),
                None => return,
            },
            event = events.recv() => match event {
                Ok(event) if filter.borrow().admits(&event) => {
                    Message::Text(serde_json::to_string(&event).expect("events serialize").into())
                }
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    Message::Text(json!({"type": "lagged", "missed": missed}).to_string().into())
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ping.tick() => {
                let heard = Duration::from_millis(last_heard.load(Ordering::Relaxed));
                if started.elapsed().saturating_sub(heard) > settings.ping_every * 2 {
                    tracing::info!("websocket client stopped answering; dropped");
                    return;
                }
                Message::Ping(Default::default())
            }
        };
        match tokio::time::timeout(settings.send_timeout, sink.send(frame)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                tracing::info!("websocket client too slow to read; dropped");
                return;
            }
        }
    }
}

/// Every 5 s: the queue's counts to live clients.
pub async fn publish_queue_stats(state: AppState) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match store::stats::queue_counts(&state.pool).await {
            Ok(counts) => {
                let _ = state.live.send(Event::QueueStats(counts));
            }
            Err(e) => tracing::warn!(error = %e, "queue stats not computed"),
        }
    }
}
