//! The `oauth` function (DESIGN §3): the well-known metadata documents, client registration,
//! the consent page, token and revocation, behind API Gateway's `/oauth/*` and `/.well-known/*`
//! routes. Wiring only: see `nib::functions::oauth`.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    nib::telemetry::init();
    let router = nib::functions::oauth_from_env()
        .await
        .inspect_err(|e| tracing::error!(error = %nib::telemetry::chain(e), "cold start failed"))?;
    lambda_http::run(router).await
}
