//! CloudWatch as the fleet's processes publish to it: the SDK client made
//! from the environment, and one PutMetricData call. The api puts the
//! scaling metric and its figures (api/cloudwatch.rs), the scheduler's
//! leader its heartbeat (scheduler/heartbeat.rs).

use anyhow::anyhow;
use aws_sdk_cloudwatch::{error::DisplayErrorContext, types::MetricDatum};

/// The SDK client from the environment: region, credentials and
/// `AWS_ENDPOINT_URL` are read by aws-config (on ECS, the task role; on the
/// host, the metrics role's credentials through `AWS_CONFIG_FILE`).
pub async fn client_from_env() -> aws_sdk_cloudwatch::Client {
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    aws_sdk_cloudwatch::Client::new(&config)
}

/// Puts `data` in `namespace`, in one call; an error says what CloudWatch
/// (or the connection to it) said.
pub async fn put(
    client: &aws_sdk_cloudwatch::Client,
    namespace: &str,
    data: Vec<MetricDatum>,
) -> anyhow::Result<()> {
    client
        .put_metric_data()
        .namespace(namespace)
        .set_metric_data(Some(data))
        .send()
        .await
        .map_err(|e| anyhow!("PutMetricData: {}", DisplayErrorContext(&e)))?;
    Ok(())
}
