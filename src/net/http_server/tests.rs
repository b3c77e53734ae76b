//! The server's own ordering, on one thread so that when each task runs is
//! known: what a connection given up before its task ran does with the
//! request head already waiting in its socket.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use axum::{Router, routing::get};

use super::*;

/// One slot per client: a second connection of the client gives up the first.
fn one_per_client() -> Limits {
    Limits {
        header_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(30),
        max_connections: 16,
        reserved_connections: 2,
        max_connections_per_client: 1,
        max_requests_per_client: 8,
    }
}

/// Reads what `stream` gets until it closes (or 5 s pass).
fn read_to_close(mut stream: TcpStream) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "current_thread")]
async fn a_connection_given_up_before_its_task_ran_still_answers_the_head_it_was_sent() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = Router::new().route("/answer", get(|| async { "answered" }));
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(serve(
        listener,
        router,
        one_per_client(),
        Clients::default(),
        shutdown.clone(),
    ));
    // The runtime has one thread and the client side below blocks it, so
    // both connections wait in the listen queue until the accept loop runs
    // them back to back: the second gives up the first, whose task has not
    // run yet and whose whole request head is in its socket. Many rounds:
    // a task that picked its close over its head by chance fails one.
    for round in 0..32 {
        let mut asked = TcpStream::connect(address).unwrap();
        asked
            .write_all(b"GET /answer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let newcomer = TcpStream::connect(address).unwrap();
        let answer = tokio::task::spawn_blocking(move || read_to_close(asked))
            .await
            .unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("answered"),
            "round {round}: the request sent before its connection was given up got {answer:?}"
        );
        drop(newcomer);
    }
    shutdown.cancel();
    server.await.unwrap().unwrap();
}
