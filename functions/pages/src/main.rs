//! The `pages` class function: list_pages, get_page, search_pages, search, fetch, invoked by
//! the `mcp` front with the verified principal (docs/design.md §3). Wiring only: see
//! `nib::functions`.

use lambda_runtime::{LambdaEvent, service_fn};
use nib::functions::ClassFunction;
use nib::tools::ToolClass;
use nib::tools::invocation::ToolInvocation;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let function = ClassFunction::from_env(ToolClass::Pages).await?;
    let function = &function;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<ToolInvocation>| async move {
            Ok::<_, lambda_runtime::Error>(function.handle(event.payload).await)
        },
    ))
    .await
}
