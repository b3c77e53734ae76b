//! A site preview's way through Redis: the api leaves the request (sealed
//! when it carries secrets) under a key that expires with the preview's
//! deadline and pushes a `PreviewV1` job into the lane's queue; the worker
//! takes the request (once: GETDEL), crawls, and pushes its answer onto a
//! reply list the api looks at. Keys expire by themselves: a preview
//! nobody takes, or whose answer nobody reads, leaves nothing behind.

use std::time::Duration;

use anyhow::Context;
use apalis_redis::ConnectionManager;

/// How long an answer waits for the api to read it.
const ANSWER_KEPT: Duration = Duration::from_secs(60);
/// How often the api looks for the answer. Not a blocking BLPOP: the api's
/// connection is shared (multiplexed), and a blocked command would hold up
/// every other command on it, live events included.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// What a request is sealed to: no other preview's request opens with it.
pub fn sealed_to(preview_id: u64) -> Vec<u8> {
    format!("preview {preview_id} request").into_bytes()
}

fn request_key(queue_name: &str, preview_id: u64) -> String {
    format!("{queue_name}:preview:{preview_id}:request")
}

fn answer_key(queue_name: &str, preview_id: u64) -> String {
    format!("{queue_name}:preview:{preview_id}:answer")
}

/// Leaves the request for a worker, until `expires_in` has passed.
pub async fn leave_request(
    conn: &mut ConnectionManager,
    queue_name: &str,
    preview_id: u64,
    request: &[u8],
    expires_in: Duration,
) -> anyhow::Result<()> {
    let _: () = redis::cmd("SET")
        .arg(request_key(queue_name, preview_id))
        .arg(request)
        .arg("PX")
        .arg(expires_in.as_millis().max(1) as u64)
        .query_async(conn)
        .await
        .context("leaving a preview request in Redis")?;
    Ok(())
}

/// Takes the request: `None` when it expired, was withdrawn, or another
/// worker took it.
pub async fn take_request(
    conn: &mut ConnectionManager,
    queue_name: &str,
    preview_id: u64,
) -> anyhow::Result<Option<Vec<u8>>> {
    redis::cmd("GETDEL")
        .arg(request_key(queue_name, preview_id))
        .query_async(conn)
        .await
        .context("taking a preview request from Redis")
}

/// Withdraws a request no worker took in time.
pub async fn withdraw_request(
    conn: &mut ConnectionManager,
    queue_name: &str,
    preview_id: u64,
) -> anyhow::Result<()> {
    let _: () = redis::cmd("DEL")
        .arg(request_key(queue_name, preview_id))
        .query_async(conn)
        .await
        .context("withdrawing a preview request")?;
    Ok(())
}

/// Hands the answer to the api waiting for it.
pub async fn answer(
    conn: &mut ConnectionManager,
    queue_name: &str,
    preview_id: u64,
    answer: &[u8],
) -> anyhow::Result<()> {
    let key = answer_key(queue_name, preview_id);
    let _: () = redis::pipe()
        .atomic()
        .cmd("RPUSH")
        .arg(&key)
        .arg(answer)
        .ignore()
        .cmd("PEXPIRE")
        .arg(&key)
        .arg(ANSWER_KEPT.as_millis() as u64)
        .ignore()
        .query_async(conn)
        .await
        .context("answering a preview")?;
    Ok(())
}

/// Waits up to `limit` for the answer; `None` when none came.
pub async fn wait_for_answer(
    conn: &mut ConnectionManager,
    queue_name: &str,
    preview_id: u64,
    limit: Duration,
) -> anyhow::Result<Option<Vec<u8>>> {
    let key = answer_key(queue_name, preview_id);
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let popped: Option<Vec<u8>> = redis::cmd("LPOP")
            .arg(&key)
            .query_async(conn)
            .await
            .context("looking for a preview's answer")?;
        if popped.is_some() {
            return Ok(popped);
        }
        if tokio::time::Instant::now() + LOOK_EVERY > deadline {
            return Ok(None);
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}
