//! What one connection is doing: serving a request, reading the head of the
//! next one, or nothing at all. The server closes a connection idle past
//! `HTTP_IDLE_TIMEOUT_SECS`, and a client at its connection cap gives up the
//! one of its connections that has served nothing the longest.

use std::{
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    body::{Body, Bytes, HttpBody},
    http::Response,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    sync::Notify,
    time::Instant,
};
use tokio_util::sync::CancellationToken;

/// The state of one connection, shared by its I/O, its requests' responses
/// and the server.
pub struct Activity {
    accepted: Instant,
    /// Requests being served: from the service's call until their response
    /// body is written (or dropped).
    busy: AtomicUsize,
    /// A byte of a next request has been read since the connection last
    /// went idle (a head is arriving: the header timeout bounds it).
    reading: AtomicBool,
    /// When it last went idle, in milliseconds after `accepted`.
    idle_since_ms: AtomicU64,
    became_idle: Notify,
    replaced: CancellationToken,
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            accepted: Instant::now(),
            busy: AtomicUsize::new(0),
            reading: AtomicBool::new(false),
            idle_since_ms: AtomicU64::new(0),
            became_idle: Notify::new(),
            replaced: CancellationToken::new(),
        })
    }

    /// Serving nothing: no request in flight (it may be reading a head).
    pub fn serves_nothing(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    /// Idle: serving nothing and not reading a next request either.
    fn is_idle(&self) -> bool {
        self.serves_nothing() && !self.reading.load(Ordering::Acquire)
    }

    /// Since when it has served nothing (its accept, or its last response).
    pub fn idle_since(&self) -> Instant {
        self.accepted + Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire))
    }

    /// A request starts being served; it ends when the returned guard drops.
    pub fn begin(self: &Arc<Self>) -> Serving {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Serving(self.clone())
    }

    /// Asks the connection to close: its client took a new one in its place.
    pub fn replace(&self) {
        self.replaced.cancel();
    }

    /// Resolves once [`Self::replace`] was called.
    pub async fn replaced(&self) {
        self.replaced.cancelled().await
    }

    /// Resolves once the connection has been idle for `limit` at a stretch.
    pub async fn idle_for(&self, limit: Duration) {
        loop {
            let became_idle = self.became_idle.notified();
            if self.is_idle() {
                let deadline = self.idle_since() + limit;
                if Instant::now() >= deadline {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = became_idle => {}
                }
            } else {
                // Serving, or reading a head (the header timeout's to bound).
                became_idle.await;
            }
        }
    }
}

/// A request being served: dropped with its response's body.
pub struct Serving(Arc<Activity>);

impl Drop for Serving {
    fn drop(&mut self) {
        let activity = &self.0;
        if activity.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            let now = Instant::now().saturating_duration_since(activity.accepted);
            activity
                .idle_since_ms
                .store(now.as_millis() as u64, Ordering::Release);
            activity.reading.store(false, Ordering::Release);
            // Stored if nobody waits yet: the idle watch sees it next time.
            activity.became_idle.notify_one();
        }
    }
}

/// A connection's stream, noting when bytes of a request arrive.
pub struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    pub fn new(inner: S, activity: Arc<Activity>) -> Self {
        Watched { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.reading.store(true, Ordering::Release);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A response body holding what its request holds (the connection's
/// [`Serving`], the client's request slot) until it is written.
pub struct Holding<T> {
    body: Body,
    _held: T,
}

impl<T: Send + Unpin + 'static> Holding<T> {
    /// `response`, its body holding `held` until it is written.
    pub fn wrap_response(response: Response<Body>, held: T) -> Response<Body> {
        response.map(|body| Body::new(Holding { body, _held: held }))
    }
}

impl<T: Unpin> HttpBody for Holding<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_connection_is_idle_only_while_it_serves_and_reads_nothing() {
        let activity = Activity::new();
        let limit = Duration::from_millis(200);
        // Fresh and silent: idle from its accept (timers never fire early;
        // a loaded machine may fire them late, hence the wide margins).
        tokio::time::timeout(limit * 25, activity.idle_for(limit))
            .await
            .expect("idle since its accept");
        // Serving: never idle, however long it takes.
        let serving = activity.begin();
        assert!(
            tokio::time::timeout(limit * 3, activity.idle_for(limit))
                .await
                .is_err()
        );
        // Served: idle again from then on, not from its accept.
        drop(serving);
        let since = Instant::now();
        activity.idle_for(limit).await;
        assert!(since.elapsed() >= limit);
        // A head arriving is not idleness.
        activity.reading.store(true, Ordering::Release);
        assert!(!activity.is_idle() && activity.serves_nothing());
    }
}
