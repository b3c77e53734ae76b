//! The Chrome DevTools Protocol, over one of two transports: the pipe a
//! local Chrome was started with (`--remote-debugging-pipe`: commands on its
//! fd 3, answers and events on its fd 4, each a JSON message ending in NUL;
//! no port is opened, so no other process can drive the browser), or a
//! remote browser's WebSocket (a JSON message per text frame). Commands,
//! answers, sessions and events are the same over both.
//!
//! One connection carries every page's commands, each page being a session of
//! it (`Target.attachToTarget` in flat mode). Chrome answers each session on
//! its own, so a page that hangs never holds up another page's command (a
//! WebDriver server runs a session's commands one at a time, and one session
//! is one browser).

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::Context;
use serde::Deserialize;
use serde_json::{Value, json, value::RawValue};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::unix::pipe,
    sync::{mpsc, oneshot},
};

use super::blocking::Blocking;

/// A command Chrome answered with an error, or could not answer.
#[derive(Debug, thiserror::Error)]
pub enum DevToolsError {
    /// Chrome refused the command (a closed target, a bad parameter...).
    #[error("{method}: {message}")]
    Refused { method: String, message: String },
    /// The browser is gone: its pipe closed.
    #[error("{0}: the browser closed its DevTools connection")]
    Closed(String),
}

/// An event of one page session, of a method the session asked for.
#[derive(Debug)]
pub struct Event {
    pub method: String,
    pub params: Value,
}

type Answer = Result<Value, DevToolsError>;

/// A connection to one Chrome; cheap to clone.
#[derive(Clone)]
pub struct DevTools {
    inner: Arc<Inner>,
}

struct Inner {
    next_id: AtomicU64,
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    /// Commands sent and not yet answered; `None` once the pipe closed.
    pending: Mutex<Option<HashMap<u64, oneshot::Sender<Answer>>>>,
    /// Page sessions and the events each wants.
    sessions: Mutex<HashMap<String, Subscriber>>,
    /// Cancelled to end the connection from this side.
    shut: tokio_util::sync::CancellationToken,
}

struct Subscriber {
    methods: &'static [&'static str],
    events: mpsc::UnboundedSender<Event>,
    /// How the session's paused requests are answered (`blocking`), right
    /// here as they arrive; `None`: none are paused.
    blocking: Option<Blocking>,
}

/// A message from Chrome: an answer (`id`) or an event (`method`). Only the
/// envelope is read here; an event's parameters are parsed only when a
/// session wants it (most network events are of no interest).
#[derive(Deserialize)]
struct Incoming<'a> {
    id: Option<u64>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(rename = "sessionId", borrow)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    error: Option<IncomingError>,
}

#[derive(Deserialize)]
struct IncomingError {
    message: String,
    #[serde(default)]
    data: Option<String>,
}

/// A remote browser's DevTools WebSocket, as `tokio-tungstenite` opens it.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl DevTools {
    /// A connection whose messages (JSON text, without framing) leave through
    /// `outgoing`; its transport hands what arrives to [`Inner::dispatch`]
    /// and calls [`Inner::close`] when it ends.
    fn with_transport() -> (DevTools, mpsc::UnboundedReceiver<Vec<u8>>) {
        let (outgoing, to_send) = mpsc::unbounded_channel::<Vec<u8>>();
        let inner = Arc::new(Inner {
            next_id: AtomicU64::new(1),
            outgoing,
            pending: Mutex::new(Some(HashMap::new())),
            sessions: Mutex::new(HashMap::new()),
            shut: tokio_util::sync::CancellationToken::new(),
        });
        (DevTools { inner }, to_send)
    }

    /// Speaks over the two pipe ends, each message ending in NUL; the
    /// connection ends when Chrome closes its end (every pending and later
    /// command then fails with `Closed`).
    pub fn over(to_chrome: pipe::Sender, from_chrome: pipe::Receiver) -> DevTools {
        let (devtools, mut to_send) = DevTools::with_transport();
        tokio::spawn(async move {
            let mut to_chrome = to_chrome;
            while let Some(mut message) = to_send.recv().await {
                message.push(0);
                if to_chrome.write_all(&message).await.is_err() {
                    return;
                }
            }
        });
        tokio::spawn({
            let inner = devtools.inner.clone();
            async move {
                let mut from_chrome = BufReader::with_capacity(64 * 1024, from_chrome);
                let mut message = Vec::new();
                loop {
                    message.clear();
                    tokio::select! {
                        read = from_chrome.read_until(0, &mut message) => match read {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {
                                if message.last() == Some(&0) {
                                    message.pop();
                                }
                                inner.dispatch(&message);
                            }
                        },
                        () = inner.shut.cancelled() => break,
                    }
                }
                inner.close();
            }
        });
        devtools
    }

    /// Speaks over a remote browser's WebSocket, a message per text frame;
    /// the connection ends when the socket closes or [`Self::shut`] is
    /// called (the socket is then closed).
    pub fn over_websocket(socket: Socket) -> DevTools {
        use futures::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let (devtools, mut to_send) = DevTools::with_transport();
        let (mut sink, mut stream) = socket.split();
        tokio::spawn({
            let inner = devtools.inner.clone();
            async move {
                loop {
                    tokio::select! {
                        message = to_send.recv() => {
                            let Some(message) = message else { break };
                            let Ok(text) = String::from_utf8(message) else { continue };
                            if sink.send(Message::text(text)).await.is_err() {
                                break;
                            }
                        }
                        () = inner.shut.cancelled() => break,
                    }
                }
                let _ = sink.close().await;
            }
        });
        tokio::spawn({
            let inner = devtools.inner.clone();
            async move {
                loop {
                    tokio::select! {
                        message = stream.next() => match message {
                            Some(Ok(Message::Text(text))) => inner.dispatch(text.as_bytes()),
                            Some(Ok(Message::Binary(bytes))) => inner.dispatch(&bytes),
                            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                            Some(Ok(_)) => {}
                        },
                        () = inner.shut.cancelled() => break,
                    }
                }
                inner.close();
            }
        });
        devtools
    }

    /// Ends the connection from this side: every waiting and later command
    /// fails with `Closed` (a remote browser is let go, not killed).
    pub fn shut(&self) {
        self.inner.shut.cancel();
        self.inner.close();
    }

    /// Sends a command (to a page session, or to the browser when `session`
    /// is `None`) and waits for its answer. Unbounded: callers that must not
    /// wait on a hung page put a timeout around it.
    pub async fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, DevToolsError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer_tx, answer) = oneshot::channel();
        {
            let mut pending = self.inner.pending.lock().expect("devtools lock");
            let Some(pending) = pending.as_mut() else {
                return Err(DevToolsError::Closed(method.to_owned()));
            };
            pending.insert(id, answer_tx);
        }
        let message = match session {
            Some(session) => {
                json!({"id": id, "method": method, "params": params, "sessionId": session})
            }
            None => json!({"id": id, "method": method, "params": params}),
        }
        .to_string()
        .into_bytes();
        if self.inner.outgoing.send(message).is_err() {
            self.inner.forget(id);
            return Err(DevToolsError::Closed(method.to_owned()));
        }
        match answer.await {
            Ok(answer) => answer.map_err(|e| match e {
                DevToolsError::Refused { message, .. } => DevToolsError::Refused {
                    method: method.to_owned(),
                    message,
                },
                closed @ DevToolsError::Closed(_) => closed,
            }),
            Err(_) => Err(DevToolsError::Closed(method.to_owned())),
        }
    }

    /// Events of `methods` on page session `session`, from now until it is
    /// [`Self::unsubscribe`]d or the connection ends.
    pub fn subscribe(
        &self,
        session: &str,
        methods: &'static [&'static str],
    ) -> mpsc::UnboundedReceiver<Event> {
        let (events, received) = mpsc::unbounded_channel();
        self.inner.sessions.lock().expect("devtools lock").insert(
            session.to_owned(),
            Subscriber {
                methods,
                events,
                blocking: None,
            },
        );
        received
    }

    /// How `session`'s paused requests are answered from now on (the caller
    /// enables or disables the pausing with `Fetch.enable` and `Fetch.disable`).
    pub fn set_blocking(&self, session: &str, blocking: Option<Blocking>) {
        if let Some(subscriber) = self
            .inner
            .sessions
            .lock()
            .expect("devtools lock")
            .get_mut(session)
        {
            subscriber.blocking = blocking;
        }
    }

    /// The host of the page `session` goes to next, for its blocking.
    pub fn set_page_host(&self, session: &str, host: Option<&str>) {
        let mut sessions = self.inner.sessions.lock().expect("devtools lock");
        if let Some(blocking) = sessions
            .get_mut(session)
            .and_then(|subscriber| subscriber.blocking.as_mut())
        {
            blocking.set_page_host(host);
        }
    }

    pub fn unsubscribe(&self, session: &str) {
        self.inner
            .sessions
            .lock()
            .expect("devtools lock")
            .remove(session);
    }

    /// Whether Chrome closed the connection (it exited, or was killed).
    pub fn is_closed(&self) -> bool {
        self.inner.pending.lock().expect("devtools lock").is_none()
    }
}

impl Inner {
    fn dispatch(&self, message: &[u8]) {
        let incoming: Incoming = match serde_json::from_slice(message) {
            Ok(incoming) => incoming,
            Err(e) => {
                tracing::debug!(error = %e, "unreadable DevTools message");
                return;
            }
        };
        if let Some(id) = incoming.id {
            let answer = match incoming.error {
                Some(error) => Err(DevToolsError::Refused {
                    method: String::new(),
                    message: match error.data {
                        Some(data) => format!("{} ({data})", error.message),
                        None => error.message,
                    },
                }),
                None => Ok(incoming
                    .result
                    .and_then(|raw| serde_json::from_str(raw.get()).ok())
                    .unwrap_or(Value::Null)),
            };
            let waiting = self
                .pending
                .lock()
                .expect("devtools lock")
                .as_mut()
                .and_then(|pending| pending.remove(&id));
            if let Some(waiting) = waiting {
                let _ = waiting.send(answer);
            }
            return;
        }
        let (Some(method), Some(session)) = (incoming.method, incoming.session_id) else {
            return;
        };
        let sessions = self.sessions.lock().expect("devtools lock");
        let Some(subscriber) = sessions.get(session.as_ref()) else {
            return;
        };
        if method == "Fetch.requestPaused" {
            // Answered here: the page waits for nothing else, and no one
            // need be reading its events.
            let paused: Value = incoming
                .params
                .and_then(|raw| serde_json::from_str(raw.get()).ok())
                .unwrap_or(Value::Null);
            let (command, params) = match &subscriber.blocking {
                Some(blocking) => blocking.answer(&paused),
                None => (
                    "Fetch.continueRequest",
                    json!({"requestId": paused["requestId"]}),
                ),
            };
            self.send_unawaited(&session, command, params);
            return;
        }
        if !subscriber.methods.contains(&method.as_ref()) {
            return;
        }
        let params = incoming
            .params
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or(Value::Null);
        let _ = subscriber.events.send(Event {
            method: method.into_owned(),
            params,
        });
    }

    /// Sends a command whose answer no one waits for (an answer to an id
    /// not pending is dropped).
    fn send_unawaited(&self, session: &str, method: &str, params: Value) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message =
            json!({"id": id, "method": method, "params": params, "sessionId": session}).to_string();
        let _ = self.outgoing.send(message.into_bytes());
    }

    fn forget(&self, id: u64) {
        if let Some(pending) = self.pending.lock().expect("devtools lock").as_mut() {
            pending.remove(&id);
        }
    }

    /// The connection ended: every waiting command fails, every subscription ends.
    fn close(&self) {
        // Dropping the senders wakes their callers with `Closed`.
        self.pending.lock().expect("devtools lock").take();
        self.sessions.lock().expect("devtools lock").clear();
    }
}

/// A value out of a command's answer, or an error naming what was missing.
pub fn field<'a>(answer: &'a Value, name: &str, method: &str) -> anyhow::Result<&'a str> {
    answer[name]
        .as_str()
        .with_context(|| format!("{method} answered without {name}: {answer}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipes() -> (pipe::Sender, pipe::Receiver) {
        pipe::pipe().expect("a pipe")
    }

    /// A fake Chrome on the other end of two pipes: answers every command
    /// with its own method name, and sends an event first.
    #[tokio::test]
    async fn answers_find_their_callers_and_events_their_sessions() {
        let (to_chrome, chrome_reads) = pipes();
        let (mut chrome_writes, from_chrome) = pipes();
        let devtools = DevTools::over(to_chrome, from_chrome);
        let mut events = devtools.subscribe("S1", &["Page.loadEventFired"]);
        tokio::spawn(async move {
            let mut reader = BufReader::new(chrome_reads);
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).await.unwrap_or(0) > 0 {
                message.pop();
                let command: Value = serde_json::from_slice(&message).unwrap();
                message.clear();
                let mut out = Vec::new();
                for event in [
                    json!({"method": "Network.dataReceived", "sessionId": "S1", "params": {}}),
                    json!({"method": "Page.loadEventFired", "sessionId": "S2", "params": {}}),
                    json!({"method": "Page.loadEventFired", "sessionId": "S1", "params": {"timestamp": 1}}),
                ] {
                    out.extend(event.to_string().into_bytes());
                    out.push(0);
                }
                let answer = if command["method"] == "Bad.command" {
                    json!({"id": command["id"], "error": {"code": -32000, "message": "no such thing"}})
                } else {
                    json!({"id": command["id"], "result": {"method": command["method"], "session": command["sessionId"]}})
                };
                out.extend(answer.to_string().into_bytes());
                out.push(0);
                chrome_writes.write_all(&out).await.unwrap();
            }
        });
        let (a, b) = tokio::join!(
            devtools.call(Some("S1"), "Page.navigate", json!({})),
            devtools.call(None, "Browser.getVersion", json!({})),
        );
        assert_eq!(
            a.unwrap(),
            json!({"method": "Page.navigate", "session": "S1"})
        );
        assert_eq!(
            b.unwrap(),
            json!({"method": "Browser.getVersion", "session": null})
        );
        let refused = devtools.call(None, "Bad.command", json!({})).await;
        assert!(
            matches!(&refused, Err(DevToolsError::Refused { method, message }) if method == "Bad.command" && message == "no such thing"),
            "{refused:?}"
        );
        // Each command's events came before its answer, in order: by now
        // every one is in, and only S1's loadEventFired, once per command.
        for _ in 0..3 {
            let event = events.try_recv().expect("one event per command");
            assert_eq!(event.method, "Page.loadEventFired");
            assert_eq!(event.params, json!({"timestamp": 1}));
        }
        assert!(
            events.try_recv().is_err(),
            "nothing of other methods or sessions"
        );
    }

    /// A fake Chrome pauses two requests of session S1 (an image, the
    /// page's script) and one of S2, whose requests are not blocked: each
    /// is answered at once from the reader, no one reading S1's events.
    #[tokio::test]
    async fn paused_requests_are_answered_by_the_sessions_blocking() {
        use crate::domain::site::BrowserResources;
        let (to_chrome, chrome_reads) = pipes();
        let (mut chrome_writes, from_chrome) = pipes();
        let devtools = DevTools::over(to_chrome, from_chrome);
        let _s1 = devtools.subscribe("S1", &["Page.loadEventFired"]);
        let _s2 = devtools.subscribe("S2", &["Page.loadEventFired"]);
        devtools.set_blocking("S1", Blocking::of(BrowserResources::default()));
        let mut out = Vec::new();
        for (session, id, kind, url) in [
            ("S1", "a", "Image", "https://shop.example/a.jpg"),
            ("S1", "b", "Script", "https://shop.example/app.js"),
            ("S2", "c", "Image", "https://shop.example/a.jpg"),
        ] {
            let event = json!({"method": "Fetch.requestPaused", "sessionId": session,
                "params": {"requestId": id, "resourceType": kind, "request": {"url": url}}});
            out.extend(event.to_string().into_bytes());
            out.push(0);
        }
        chrome_writes.write_all(&out).await.unwrap();
        let mut reader = BufReader::new(chrome_reads);
        let mut answers = Vec::new();
        for _ in 0..3 {
            let mut message = Vec::new();
            reader.read_until(0, &mut message).await.unwrap();
            message.pop();
            let command: Value = serde_json::from_slice(&message).unwrap();
            answers.push((
                command["sessionId"].as_str().unwrap().to_owned(),
                command["method"].as_str().unwrap().to_owned(),
                command["params"].clone(),
            ));
        }
        assert_eq!(
            answers,
            [
                (
                    "S1".to_owned(),
                    "Fetch.failRequest".to_owned(),
                    json!({"requestId": "a", "errorReason": "BlockedByClient"})
                ),
                (
                    "S1".to_owned(),
                    "Fetch.continueRequest".to_owned(),
                    json!({"requestId": "b"})
                ),
                (
                    "S2".to_owned(),
                    "Fetch.continueRequest".to_owned(),
                    json!({"requestId": "c"})
                ),
            ]
        );
    }

    #[tokio::test]
    async fn a_closed_pipe_fails_every_waiting_and_later_command() {
        let (to_chrome, chrome_reads) = pipes();
        let (chrome_writes, from_chrome) = pipes();
        let devtools = DevTools::over(to_chrome, from_chrome);
        let waiting = tokio::spawn({
            let devtools = devtools.clone();
            async move { devtools.call(None, "Browser.getVersion", json!({})).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        drop((chrome_reads, chrome_writes));
        let answer = waiting.await.unwrap();
        assert!(
            matches!(answer, Err(DevToolsError::Closed(_))),
            "{answer:?}"
        );
        let later = devtools.call(None, "Browser.getVersion", json!({})).await;
        assert!(matches!(later, Err(DevToolsError::Closed(_))), "{later:?}");
        assert!(devtools.is_closed());
    }
}
