//! The `ingest` function (docs/design.md §3): S3 ObjectCreated events on `uploads/` become pages through
//! the import path of `nib import`. A record that fails for a reason a retry can cure (S3, the
//! store) fails the invocation, so Lambda retries it and then hands it to the dead-letter queue;
//! a bad page is logged and dropped. Wiring only: see `nib::functions::ingest`.

use aws_lambda_events::event::s3::S3Event;
use lambda_runtime::{LambdaEvent, service_fn};
use nib::functions::ingest::{Ingest, Tally};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let ingest = nib::functions::ingest_from_env().await?;
    let ingest = &ingest;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<S3Event>| async move {
        handle(ingest, event.payload).await
    }))
    .await
}

/// Each record in turn; `Ingest::record` logs what became of it (ids only, never the key).
async fn handle(
    ingest: &Ingest,
    event: S3Event,
) -> Result<serde_json::Value, lambda_runtime::Error> {
    let mut tally = Tally::default();
    for record in event.records {
        let (Some(bucket), Some(key)) = (record.s3.bucket.name, record.s3.object.key) else {
            continue;
        };
        ingest.record(&bucket, &key, &mut tally).await?;
    }
    Ok(serde_json::to_value(tally)?)
}
