//! Class 4: WebSocket abuse on /ws. A flood of clients on one read token
//! until the api refuses more (503 on the upgrade), messages over 64 KiB
//! (close 1009), binary and garbage frames, malformed subscriptions (each
//! answered with an error frame, the connection kept), a client that never
//! reads, and tokens given as `?token=` (which no log may show). Through
//! all of it /health must keep answering.

use std::time::Duration;

use futures::{SinkExt, StreamExt, future::join_all};
use serde_json::Value;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream,
    tungstenite::{self, Message, client::IntoClientRequest, protocol::frame::coding::CloseCode},
};

use crate::{
    client::{Api, Token},
    ledger::{Answer, Expect},
    raw::{masked_frame, ws_upgrade},
};

/// Clients opened on one read token at most, looking for the cap.
const FLOOD_LIMIT: usize = 1_200;
/// Clients opened at once while flooding.
const FLOOD_BATCH: usize = 25;
/// How long an answer (a frame, a close) may take.
const FRAME_LIMIT: Duration = Duration::from_secs(3);

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

enum Refusal {
    Status(u16, Vec<u8>),
    Failed(String),
}

/// A client on /ws with `token`, in the Authorization header or, as
/// browsers send it, in the query (`?{param}=`).
async fn connect(api: &Api, token: Token, param: Option<&str>) -> Result<Socket, Refusal> {
    let secret = api.token(token).unwrap_or_default();
    let url = match param {
        Some(param) => format!("ws://127.0.0.1:{}/ws?{param}={secret}", api.port),
        None => format!("ws://127.0.0.1:{}/ws", api.port),
    };
    let mut request = url
        .into_client_request()
        .map_err(|e| Refusal::Failed(e.to_string()))?;
    if param.is_none() && token != Token::None {
        let value = format!("Bearer {secret}").parse().expect("a header value");
        request.headers_mut().insert("authorization", value);
    }
    let connected = tokio::time::timeout(
        Duration::from_secs(5),
        tokio_tungstenite::connect_async(request),
    )
    .await;
    match connected {
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(tungstenite::Error::Http(response))) => Err(Refusal::Status(
            response.status().as_u16(),
            response.body().clone().unwrap_or_default(),
        )),
        Ok(Err(e)) => Err(Refusal::Failed(e.to_string())),
        Err(_) => Err(Refusal::Failed(
            "no answer to the upgrade within 5 s".into(),
        )),
    }
}

/// Sends one message, bounded: a server that stops reading must not stall
/// the driver. Whether it went.
async fn send(ws: &mut Socket, message: Message) -> bool {
    matches!(
        tokio::time::timeout(FRAME_LIMIT, ws.send(message)).await,
        Ok(Ok(()))
    )
}

/// How a wait for the server ended.
enum Next {
    Json(Value),
    Closed(Option<u16>),
    Ended(String),
    TimedOut,
}

/// The next JSON frame or the end, skipping the server's own events.
async fn next(api: &Api, ws: &mut Socket, what: &str) -> Next {
    // One limit for the whole wait: a stream of events must not extend it.
    let deadline = tokio::time::Instant::now() + FRAME_LIMIT;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => return Next::TimedOut,
            Ok(None) => return Next::Ended("connection ended".into()),
            Ok(Some(Err(e))) => return Next::Ended(e.to_string()),
            Ok(Some(Ok(Message::Close(frame)))) => {
                return Next::Closed(frame.map(|f| u16::from(f.code)));
            }
            Ok(Some(Ok(Message::Text(text)))) => {
                api.ledger.received(what, text.as_bytes());
                let Ok(json) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if matches!(json["type"].as_str(), Some("error" | "subscribed")) {
                    return Next::Json(json);
                }
            }
            Ok(Some(Ok(_))) => {}
        }
    }
}

pub async fn run(api: &Api) {
    flood(api).await;
    too_big(api).await;
    malformed_subscriptions(api).await;
    garbage_frames(api).await;
    never_reads(api).await;
    tokens_in_queries(api).await;
}

async fn flood(api: &Api) {
    let mut open = Vec::new();
    let mut refused = None;
    while open.len() < FLOOD_LIMIT && refused.is_none() {
        let batch = join_all((0..FLOOD_BATCH).map(|_| connect(api, Token::Read, None))).await;
        for result in batch {
            api.ledger.tried();
            let what = format!("ws: client {} on one read token", open.len() + 1);
            match result {
                Ok(ws) => open.push(ws),
                Err(Refusal::Status(status, body)) => {
                    api.ledger.received(&what, &body);
                    api.ledger
                        .judge(&what, &Answer { status, body }, &Expect::Status(&[503]));
                    refused = Some(status);
                }
                Err(Refusal::Failed(e)) => {
                    api.ledger.dropped(&what, e);
                    refused = Some(0);
                }
            }
        }
    }
    if refused.is_none() {
        api.ledger.unexpected(
            "ws: flood",
            format!("no cap: {} clients accepted on one read token", open.len()),
        );
    }
    api.check_health(&format!("with {} WebSocket clients open", open.len()))
        .await;
    // Another token still gets in unless the global cap is reached: either is fine.
    api.ledger.tried();
    let what = "ws: a client on the write token during the flood";
    match connect(api, Token::Write, None).await {
        Ok(ws) => drop(ws),
        Err(Refusal::Status(status, body)) => {
            api.ledger
                .judge(what, &Answer { status, body }, &Expect::Status(&[503]));
        }
        Err(Refusal::Failed(e)) => api.ledger.dropped(what, e),
    }
    drop(open);
    // The flood's slots come back as the api reads each client's end: the
    // read token must get in again (within 10 s, milliseconds normally)
    // before the next checks use it.
    let freed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if connect(api, Token::Read, None).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    if freed.is_err() {
        api.ledger.unexpected(
            "ws: after the flood",
            "the read token's slots did not come back within 10 s".to_owned(),
        );
    }
}

/// Messages past 64 KiB: the connection closes with 1009.
async fn too_big(api: &Api) {
    let padding = "x".repeat(100 * 1024);
    let messages = [
        (
            "a 100 KiB text message",
            Message::text(format!(r#"{{"subscribe": {{}}, "padding": "{padding}"}}"#)),
        ),
        (
            "a 100 KiB binary message",
            Message::binary(padding.clone().into_bytes()),
        ),
    ];
    for (what, message) in messages {
        api.ledger.tried();
        let what = format!("ws: {what}");
        let Ok(mut ws) = connect(api, Token::Read, None).await else {
            api.ledger.dropped(&what, "could not connect");
            continue;
        };
        send(&mut ws, message).await;
        match next(api, &mut ws, &what).await {
            Next::Closed(Some(code)) if code == u16::from(CloseCode::Size) => {}
            Next::Closed(code) => api
                .ledger
                .unexpected(&what, format!("closed with {code:?}, expected 1009")),
            Next::Json(reply) => api
                .ledger
                .accepted(&what, format!("answered {reply}, expected close 1009")),
            Next::Ended(why) => api.ledger.dropped(&what, format!("no close frame: {why}")),
            Next::TimedOut => api.ledger.dropped(&what, "no close frame within 3 s"),
        }
    }
}

/// Each malformed message gets an error frame and the connection stays;
/// a valid subscription after them is still answered.
async fn malformed_subscriptions(api: &Api) {
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    let messages: Vec<(&str, Message)> = vec![
        ("not JSON", Message::text("not json")),
        ("an empty text", Message::text("")),
        ("a NUL", Message::text("\u{0}")),
        ("{}", Message::text("{}")),
        ("subscribe null", Message::text(r#"{"subscribe": null}"#)),
        (
            "a text site_id",
            Message::text(r#"{"subscribe": {"site_id": "x"}}"#),
        ),
        (
            "site_id 1e400",
            Message::text(r#"{"subscribe": {"site_id": 1e400}}"#),
        ),
        (
            "site_id past i64",
            Message::text(r#"{"subscribe": {"site_id": 99999999999999999999}}"#),
        ),
        (
            "an unknown filter",
            Message::text(r#"{"subscribe": {"run_id": -1, "evil": 1}}"#),
        ),
        (
            "subscribe twice",
            Message::text(r#"{"subscribe": {"keyword_id": 1}, "subscribe": {}}"#),
        ),
        (
            "trailing garbage",
            Message::text(r#"{"subscribe": {}} trailing"#),
        ),
        ("20,000 nested arrays", Message::text(deep)),
        (
            "a binary frame",
            Message::binary(b"{\"subscribe\": {}}".to_vec()),
        ),
    ];
    api.ledger.tried();
    let Ok(mut ws) = connect(api, Token::Read, None).await else {
        api.ledger
            .dropped("ws: malformed subscriptions", "could not connect");
        return;
    };
    for (what, message) in messages {
        api.ledger.tried();
        let what = format!("ws: {what}");
        if !send(&mut ws, message).await {
            api.ledger.dropped(&what, "the connection was gone");
            return;
        }
        match next(api, &mut ws, &what).await {
            Next::Json(reply) if reply["type"] == "error" => {}
            Next::Json(reply) => api.ledger.accepted(&what, format!("answered {reply}")),
            Next::Closed(code) => {
                api.ledger.dropped(
                    &what,
                    format!("closed ({code:?}) instead of an error frame"),
                );
                return;
            }
            Next::Ended(why) => {
                api.ledger.dropped(&what, why);
                return;
            }
            Next::TimedOut => api.ledger.dropped(&what, "no error frame within 3 s"),
        }
    }
    api.ledger.tried();
    let what = "ws: a valid subscription after the malformed ones";
    send(&mut ws, Message::text(r#"{"subscribe": {"site_id": 1}}"#)).await;
    match next(api, &mut ws, what).await {
        Next::Json(reply) if reply["type"] == "subscribed" => {}
        _ => api.ledger.dropped(what, "not answered with subscribed"),
    }
}

/// Frames that break the protocol: the server must end the connection
/// (a close frame or EOF) rather than keep it or fall over.
async fn garbage_frames(api: &Api) {
    let mut unmasked = masked_frame(0x1, b"{}");
    unmasked[1] &= 0x7f;
    unmasked.truncate(2);
    unmasked.extend_from_slice(b"{}");
    let endless = [
        0x82, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
    ]
    .to_vec();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a reserved opcode", masked_frame(0x3, b"x")),
        ("an unmasked client frame", unmasked),
        (
            "a continuation with nothing to continue",
            masked_frame(0x0, b"x"),
        ),
        ("a frame announcing 2^63 bytes", endless),
        ("a 130-byte ping", masked_frame(0x9, &[b'p'; 130])),
        (
            "4 KiB of noise",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
                .collect(),
        ),
    ];
    for (what, bytes) in cases {
        api.ledger.tried();
        let what = format!("ws: {what}");
        let Some(mut socket) = ws_upgrade(api).await else {
            api.ledger.dropped(&what, "the upgrade failed");
            continue;
        };
        let _ = tokio::time::timeout(FRAME_LIMIT, socket.write_all(&bytes)).await;
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        let ended = tokio::time::timeout(FRAME_LIMIT, async {
            while let Ok(n) = socket.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                reply.extend_from_slice(&buf[..n]);
            }
        })
        .await;
        api.ledger.received(&what, &reply);
        if ended.is_err() {
            api.ledger
                .unexpected(&what, "the connection was still open after 3 s");
        }
    }
}

/// A client that sends and never reads: the server must drop it in time
/// and keep answering others meanwhile.
async fn never_reads(api: &Api) {
    api.ledger.tried();
    let what = "ws: a client that never reads";
    let Some(mut socket) = ws_upgrade(api).await else {
        api.ledger.dropped(what, "the upgrade failed");
        return;
    };
    let subscribe = masked_frame(0x1, br#"{"subscribe": {"site_id": 1}}"#);
    let ping = masked_frame(0x9, b"ping");
    let flood: Vec<u8> = (0..20_000)
        .flat_map(|i| {
            if i % 2 == 0 {
                subscribe.clone()
            } else {
                ping.clone()
            }
        })
        .collect();
    // Bounded: once the server stops reading, the write stalls.
    let _ = tokio::time::timeout(Duration::from_secs(4), socket.write_all(&flood)).await;
    api.check_health("while a WebSocket client does not read")
        .await;
    drop(socket);
}

/// Browsers give the token in the query: it works, and no log may show it
/// (the secrets search reads every log at the end).
async fn tokens_in_queries(api: &Api) {
    for (token, param) in [
        (Token::Read, "token"),
        (Token::Write, "token"),
        (Token::Read, "%74oken"),
    ] {
        api.ledger.tried();
        let what = format!("ws: {token:?} token as ?{param}=");
        match connect(api, token, Some(param)).await {
            Ok(mut ws) => {
                send(&mut ws, Message::text(r#"{"subscribe": {}}"#)).await;
                if !matches!(next(api, &mut ws, &what).await, Next::Json(_)) {
                    api.ledger.dropped(&what, "no answer to a subscription");
                }
            }
            Err(Refusal::Status(status, body)) => {
                api.ledger
                    .judge(&what, &Answer { status, body }, &Expect::Status(&[101]));
            }
            Err(Refusal::Failed(e)) => api.ledger.dropped(&what, e),
        }
    }
    let path = format!("/api/jobs/queue?token={}", api.tokens.write);
    api.call(
        "the write token in a query",
        api.request(reqwest::Method::GET, &path, Token::Read),
        Expect::NotServerError,
    )
    .await;
}
