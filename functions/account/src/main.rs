//! The `account` function: the web app's `delete_account` (`Accounts::delete`, as `nib user
//! delete`), invoked by the `mcp` front only, with the principal it verified (no API Gateway
//! route reaches it). Its role is the one that reaches everything a deletion removes. Wiring
//! only: see `nib::functions`.

use lambda_runtime::{LambdaEvent, service_fn};
use nib::functions::ClassFunction;
use nib::tools::ToolClass;
use nib::tools::invocation::ToolInvocation;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let function = ClassFunction::from_env(ToolClass::Account).await?;
    let function = &function;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<ToolInvocation>| async move {
            Ok::<_, lambda_runtime::Error>(function.handle(event.payload).await)
        },
    ))
    .await
}
