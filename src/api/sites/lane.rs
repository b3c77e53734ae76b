//! Asking a worker of a lane: a preview or a learning is left in Redis
//! (sealed: it may carry header values and proxy credentials), a
//! `PreviewV1` job pushed to the lane, and the worker's answer awaited
//! (`queue::preview`). The api itself never loads a page.

use apalis::prelude::TaskSink;

use crate::{
    api::{ApiError, AppState},
    domain::{learn::LaneRequest, site::RenderMode},
    queue::{self, Job, Lane, preview},
    store::sealing,
};

/// The lane whose workers load pages in `render` mode.
pub(super) fn lane_for(render: RenderMode) -> Lane {
    Lane::ALL
        .into_iter()
        .find(|lane| lane.render_modes().contains(&render))
        .expect("every render mode has a lane")
}

/// Hands `request` to a worker of `lane` and waits for its answer, up to
/// PREVIEW_TIMEOUT_SECS; none in time is a 503 (`what`: "the preview").
pub(super) async fn ask_worker(
    state: &AppState,
    lane: Lane,
    request: &LaneRequest,
    what: &str,
) -> Result<Vec<u8>, ApiError> {
    let preview_id: u64 = rand::random();
    let plain = serde_json::to_vec(request).expect("a lane request serializes");
    // Header values and proxy credentials are secrets: sealed in Redis too.
    let request = match &state.session_key {
        Some(key) => sealing::seal(key, &preview::sealed_to(preview_id), &plain).into_bytes(),
        None => plain,
    };
    let mut conn = state.redis.clone();
    preview::leave_request(
        &mut conn,
        &state.queue_name,
        preview_id,
        &request,
        state.preview_timeout,
    )
    .await?;
    let mut lane_queue = queue::storage(conn.clone(), &lane.queue_name(&state.queue_name), 1);
    lane_queue
        .push(Job::PreviewV1 { preview_id })
        .await
        .map_err(|e| anyhow::anyhow!("pushing a preview job: {e:?}"))?;
    let answer = preview::wait_for_answer(
        &mut conn,
        &state.queue_name,
        preview_id,
        state.preview_timeout,
    )
    .await?;
    match answer {
        Some(answer) => Ok(answer),
        None => {
            // A worker that takes the job later finds nothing to do.
            preview::withdraw_request(&mut conn, &state.queue_name, preview_id).await?;
            Err(ApiError::Overloaded(format!(
                "no worker answered {what} within {} s: are workers of the {} lane running, and free?",
                state.preview_timeout.as_secs(),
                lane.as_str()
            )))
        }
    }
}
