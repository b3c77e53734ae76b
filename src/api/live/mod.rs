//! `/ws`: live events for WebSocket clients. One send task and one receive
//! task per client under `select!`; each client reads from a bounded broadcast
//! receiver, so a slow client lags (and is told how much it missed) but never
//! blocks others or grows memory; a client that stops answering is dropped.

pub mod relay;
mod slots;
mod subscription;

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
use serde_json::json;
use tokio::sync::{broadcast, mpsc, watch};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{ApiError, AppState, auth::TokenKey};
use crate::{
    events::{Event, QueueStats},
    ops::metrics::metrics,
};
pub use slots::LiveSlots;
use subscription::{Filter, read_subscription};

/// Largest message a client may send: a subscription is a few dozen bytes.
/// Anything larger closes the connection with 1009 (message too big).
pub const MAX_CLIENT_MESSAGE_BYTES: usize = 64 * 1024;

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

/// Live events as JSON text frames: `run.updated` (id, keyword_id, keyword,
/// site_id, site, state, attempt, pages, items, error), `result.stored`
/// (run_id, keyword_id, site_id, page, count), `queue.stats` (queue counts,
/// `backlog`, `workers`; every 5 s),
/// `lagged` (missed). Send `{"subscribe": {"keyword_id"?, "site_id"?,
/// "run_id"?}}` to filter: the answer is `subscribed`, or `error` naming the
/// field at fault. Messages over 64 KiB close the connection (1009). The
/// token may be given as `?token=`. Past `MAX_WS_CLIENTS` clients, or
/// `MAX_WS_CLIENTS_PER_TOKEN` of one token, the answer is 503.
#[utoipa::path(get, path = "/ws", tag = "live", security(("bearer" = [])),
    params(("token" = Option<String>, Query, description = "The bearer token, for browsers")),
    responses((status = 101, description = "Switching to the WebSocket protocol"), (status = 401, body = super::error::ErrorBody),
              (status = 503, description = "Too many clients, in all or of this token", body = super::error::ErrorBody)))]
async fn upgrade(
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
    State(state): State<AppState>,
    token: Option<axum::Extension<TokenKey>>,
) -> Result<Response, ApiError> {
    let ws = ws.map_err(|rejection| ApiError::BadRequest {
        message: format!("/ws speaks WebSocket only: {}", rejection.body_text()),
        field: None,
    })?;
    let slot = state
        .live_slots
        .take(token.map(|axum::Extension(key)| key))
        .map_err(|full| {
            metrics()
                .websocket_refusals
                .with_label_values(&[full.as_str()])
                .inc();
            ApiError::Overloaded(match full {
                slots::Full::All => "too many live clients; try again later".to_owned(),
                slots::Full::Token => {
                    "this token has as many live clients as it may; close one first".to_owned()
                }
            })
        })?;
    Ok(ws
        .max_message_size(MAX_CLIENT_MESSAGE_BYTES)
        .max_frame_size(MAX_CLIENT_MESSAGE_BYTES)
        .on_upgrade(move |socket| {
            // Tracked, so shutdown can wait for every client's close frame.
            let clients = state.live_clients.clone();
            clients.track_future(async move {
                serve_client(socket, state).await;
                drop(slot);
            })
        }))
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

/// Whether a receive error is a message over the size limit.
fn too_big(error: axum::Error) -> bool {
    error
        .into_inner()
        .downcast::<tungstenite::Error>()
        .is_ok_and(|e| matches!(*e, tungstenite::Error::Capacity(_)))
}

async fn serve_client(socket: WebSocket, state: AppState) {
    let _gauge = ClientGauge::new();
    let send_timeout = state.live_settings.send_timeout;
    let (sink, mut stream) = socket.split();
    let events = state.live.subscribe();
    let (filter_tx, filter_rx) = watch::channel(Filter::default());
    let started = Instant::now();
    // Milliseconds since `started` of the last frame the client sent.
    let last_heard = Arc::new(AtomicU64::new(0));

    // Answers to the client's messages, and the close frame that ends a
    // connection whose client broke the rules.
    let (reply_tx, reply_rx) = mpsc::channel::<Message>(8);
    let mut send = tokio::spawn(send_events(
        sink,
        events,
        filter_rx,
        reply_rx,
        state,
        started,
        last_heard.clone(),
    ));
    let mut receive = tokio::spawn(async move {
        loop {
            let message = match stream.next().await {
                Some(Ok(message)) => message,
                Some(Err(e)) => {
                    if too_big(e) {
                        let close = CloseFrame {
                            code: close_code::SIZE,
                            reason: Utf8Bytes::from_static("message too big: at most 64 KiB"),
                        };
                        let _ = reply_tx.send(Message::Close(Some(close))).await;
                    }
                    return;
                }
                None => return,
            };
            last_heard.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
            let reply = match message {
                Message::Text(text) => match read_subscription(&text) {
                    Ok(subscribe) => {
                        let reply = json!({"type": "subscribed", "filter": subscribe});
                        let _ = filter_tx.send(subscribe);
                        reply
                    }
                    Err(error) => error,
                },
                Message::Binary(_) => json!({
                    "type": "error",
                    "message": "binary frames are not understood: send JSON text frames"
                }),
                Message::Close(_) => return,
                Message::Ping(_) | Message::Pong(_) => continue,
            };
            if reply_tx
                .send(Message::Text(reply.to_string().into()))
                .await
                .is_err()
            {
                return;
            }
        }
    });
    tokio::select! {
        _ = &mut send => receive.abort(),
        _ = &mut receive => {
            // The send task ends once it has sent what the receive task left
            // for it (a close frame, say): the reply channel is closed.
            if tokio::time::timeout(send_timeout, &mut send).await.is_err() {
                send.abort();
            }
        }
    }
}

async fn send_events(
    mut sink: SplitSink<WebSocket, Message>,
    mut events: broadcast::Receiver<Event>,
    filter: watch::Receiver<Filter>,
    mut replies: mpsc::Receiver<Message>,
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
            // In this order: a close frame or a ping must not wait behind a
            // flood of events.
            biased;
            _ = state.shutdown.cancelled() => {
                let close = CloseFrame { code: close_code::AWAY, reason: Utf8Bytes::from_static("server shutting down") };
                let _ = tokio::time::timeout(settings.send_timeout, sink.send(Message::Close(Some(close)))).await;
                return;
            }
            reply = replies.recv() => match reply {
                Some(close @ Message::Close(_)) => {
                    let _ = tokio::time::timeout(settings.send_timeout, sink.send(close)).await;
                    return;
                }
                Some(reply) => reply,
                // The client is gone or closed: complete its closing handshake.
                None => {
                    let _ = tokio::time::timeout(settings.send_timeout, sink.close()).await;
                    return;
                }
            },
            _ = ping.tick() => {
                let heard = Duration::from_millis(last_heard.load(Ordering::Relaxed));
                if started.elapsed().saturating_sub(heard) > settings.ping_every * 2 {
                    tracing::info!("websocket client stopped answering; dropped");
                    return;
                }
                Message::Ping(Default::default())
            }
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

/// Every 5 s: the queue's counts and the workers seen, to live clients.
pub async fn publish_queue_stats(state: AppState) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match QueueStats::read(&state.pool).await {
            Ok(stats) => {
                let _ = state.live.send(Event::QueueStats(stats));
            }
            Err(e) => tracing::warn!(error = %e, "queue stats not computed"),
        }
    }
}
