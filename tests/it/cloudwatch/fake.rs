//! A stand-in for CloudWatch on loopback: it answers PutMetricData in the
//! Smithy RPC v2 CBOR protocol the real SDK speaks (aws-sdk-cloudwatch >=
//! 1.100; moto does not), records every put, and can fail or hang on demand.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use aws_config::{BehaviorVersion, Region};
use aws_sdk_cloudwatch::config::Credentials;
use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode, Uri, header},
    response::{IntoResponse, Response},
    routing::post,
};
use ciborium::Value as Cbor;
use tokio::task::JoinHandle;

use crate::support::eventually;

const PUT_METRIC_DATA: &str = "/service/GraniteServiceVersion20100801/operation/PutMetricData";

/// How the stand-in answers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Mode {
    Accept,
    /// 500 with CloudWatch's InternalServiceError body.
    Fail,
    /// Never answers.
    Hang,
}

/// One PutMetricData request as it arrived.
#[derive(Debug, Clone)]
pub(super) struct Put {
    pub(super) at: Instant,
    /// How the stand-in answered it (the mode when it arrived).
    pub(super) answered: Mode,
    /// The data's timestamp (seconds): one per tick, the same in the
    /// SDK's retries of a failed request.
    pub(super) stamped: f64,
    /// When the client gave up on the request (the handler was dropped).
    pub(super) abandoned_at: Option<Instant>,
    pub(super) namespace: String,
    pub(super) data: Vec<Datum>,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Datum {
    pub(super) name: String,
    pub(super) value: f64,
    pub(super) unit: String,
    pub(super) has_dimensions: bool,
    /// `StorageResolution` as sent: 1 for a high-resolution metric; none
    /// (CloudWatch's default, 60) for a standard one.
    pub(super) storage_resolution: Option<i64>,
}

impl Put {
    pub(super) fn datum(&self, name: &str) -> &Datum {
        self.data
            .iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("{name} in {self:?}"))
    }

    pub(super) fn value(&self, name: &str) -> f64 {
        self.datum(name).value
    }
}

#[derive(Default)]
pub(super) struct Recorded {
    pub(super) puts: Vec<Put>,
    /// Requests that were not a well-formed RPC v2 CBOR PutMetricData.
    pub(super) malformed: Vec<String>,
}

/// What the stand-in's handlers share with the test.
pub(super) struct Shared {
    mode: Mutex<Mode>,
    recorded: Mutex<Recorded>,
}

/// A stand-in for CloudWatch on 127.0.0.1, recording every request.
pub(super) struct FakeCloudWatch {
    pub(super) endpoint: String,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl FakeCloudWatch {
    pub(super) async fn start(mode: Mode) -> FakeCloudWatch {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            mode: Mutex::new(mode),
            recorded: Mutex::default(),
        });
        let app = Router::new()
            .route(PUT_METRIC_DATA, post(put_metric_data))
            .fallback(|uri: Uri, State(shared): State<Arc<Shared>>| async move {
                let mut recorded = shared.recorded.lock().unwrap();
                recorded.malformed.push(format!("path {uri}"));
                StatusCode::NOT_FOUND
            })
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeCloudWatch {
            endpoint,
            shared,
            server,
        }
    }

    pub(super) fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = mode;
    }

    pub(super) fn puts(&self) -> Vec<Put> {
        let recorded = self.shared.recorded.lock().unwrap();
        assert!(recorded.malformed.is_empty(), "{:?}", recorded.malformed);
        recorded.puts.clone()
    }

    /// Waits for the put after the first `seen` ones. Callers mostly allow 5 s
    /// for a put due within a second (ticks are a second apart, the first one a
    /// second after the lock is taken): five ticks.
    pub(super) async fn put_after(&self, seen: usize, limit: Duration) -> Put {
        eventually(limit, "a PutMetricData arrives", || async {
            self.puts().get(seen).cloned()
        })
        .await
    }

    /// An SDK client pointed at this stand-in, configured in code (no
    /// environment, so no metadata-endpoint probing).
    pub(super) async fn client(&self) -> aws_sdk_cloudwatch::Client {
        let config = aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(&self.endpoint)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .load()
            .await;
        aws_sdk_cloudwatch::Client::new(&config)
    }

    pub(super) fn stop(&self) {
        self.server.abort();
    }
}

/// Marks the handler's request abandoned when the client drops it.
pub(super) struct OnDrop(Arc<Shared>, usize);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.recorded.lock().unwrap().puts[self.1].abandoned_at = Some(Instant::now());
    }
}

async fn put_metric_data(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    let header_is = |name: &str, want: &str| headers.get(name).is_some_and(|v| v == want);
    let put = if !header_is("smithy-protocol", "rpc-v2-cbor")
        || !header_is(header::CONTENT_TYPE.as_str(), "application/cbor")
    {
        Err(format!("headers {headers:?}"))
    } else {
        ciborium::from_reader::<Cbor, _>(&body[..])
            .map_err(|e| format!("CBOR body: {e}"))
            .and_then(|body| decode_put(at, &body))
    };
    // Decided on arrival: a test that changes the mode once it has seen a
    // put changes how the later ones are answered, never that one.
    let mode = *shared.mode.lock().unwrap();
    let index = {
        let mut recorded = shared.recorded.lock().unwrap();
        match put {
            Ok(put) => recorded.puts.push(Put {
                answered: mode,
                ..put
            }),
            Err(e) => {
                recorded.malformed.push(e);
                return StatusCode::BAD_REQUEST.into_response();
            }
        }
        recorded.puts.len() - 1
    };
    match mode {
        Mode::Accept => cbor_response(StatusCode::OK, &Cbor::Map(vec![])),
        Mode::Fail => cbor_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &Cbor::Map(vec![
                (
                    "__type".into(),
                    "com.amazonaws.cloudwatch#InternalServiceError".into(),
                ),
                ("message".into(), "stand-in failure".into()),
            ]),
        ),
        Mode::Hang => {
            let _abandoned = OnDrop(shared.clone(), index);
            std::future::pending().await
        }
    }
}

/// What the SDK expects of an RPC v2 CBOR answer: the protocol header and a
/// CBOR body.
fn cbor_response(status: StatusCode, body: &Cbor) -> Response {
    let mut bytes = Vec::new();
    ciborium::into_writer(body, &mut bytes).unwrap();
    (
        status,
        [
            ("smithy-protocol", "rpc-v2-cbor"),
            (header::CONTENT_TYPE.as_str(), "application/cbor"),
        ],
        bytes,
    )
        .into_response()
}

fn field<'a>(map: &'a Cbor, key: &str) -> Option<&'a Cbor> {
    map.as_map()?
        .iter()
        .find(|(k, _)| k.as_text() == Some(key))
        .map(|(_, v)| v)
}

fn decode_put(at: Instant, body: &Cbor) -> Result<Put, String> {
    let text = |v: Option<&Cbor>, what: &str| {
        v.and_then(Cbor::as_text)
            .map(str::to_owned)
            .ok_or_else(|| format!("{what} in {body:?}"))
    };
    let data = field(body, "MetricData")
        .and_then(Cbor::as_array)
        .ok_or_else(|| format!("MetricData in {body:?}"))?
        .iter()
        .map(|d| {
            Ok(Datum {
                name: text(field(d, "MetricName"), "MetricName")?,
                value: field(d, "Value")
                    .and_then(Cbor::as_float)
                    .ok_or_else(|| format!("Value in {d:?}"))?,
                unit: text(field(d, "Unit"), "Unit")?,
                has_dimensions: field(d, "Dimensions").is_some(),
                storage_resolution: field(d, "StorageResolution")
                    .map(|r| {
                        r.as_integer()
                            .and_then(|i| i64::try_from(i).ok())
                            .ok_or_else(|| format!("StorageResolution in {d:?}"))
                    })
                    .transpose()?,
            })
        })
        .collect::<Result<_, String>>()?;
    let stamped = field(body, "MetricData")
        .and_then(Cbor::as_array)
        .and_then(|data| data.first())
        .and_then(|d| field(d, "Timestamp"))
        .and_then(|t| match t {
            Cbor::Tag(1, epoch) => epoch
                .as_float()
                .or_else(|| epoch.as_integer().map(|i| i128::from(i) as f64)),
            _ => None,
        })
        .ok_or_else(|| format!("Timestamp (tag 1) in {body:?}"))?;
    Ok(Put {
        at,
        answered: Mode::Accept,
        stamped,
        abandoned_at: None,
        namespace: text(field(body, "Namespace"), "Namespace")?,
        data,
    })
}
