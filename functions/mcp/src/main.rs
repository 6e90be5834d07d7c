//! The `mcp` front (docs/design.md §3): behind API Gateway's `/mcp` routes, it authenticates, applies
//! rate limits, answers lifecycle and discovery itself and forwards `tools/call` to the class
//! function that owns the tool. The same axum router as `nib serve`, over API Gateway v2 events
//! (`lambda_http`). Wiring only: see `nib::functions::front`.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    let router = nib::functions::front_from_env().await?;
    lambda_http::run(router).await
}
