//! The `tasks` class function: list_tasks, create_task, update_task_status, invoked by
//! the `mcp` front with the verified principal (docs/design.md §3), and the Notion outbox
//! timer, invoked once a minute by EventBridge Scheduler (`infra/schedule.tf`). Wiring only: see
//! `nib::functions`.

use lambda_runtime::{LambdaEvent, service_fn};
use nib::functions::{ClassFunction, TasksEvent};
use nib::tools::ToolClass;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let function = ClassFunction::from_env(ToolClass::Tasks).await?;
    let function = &function;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<TasksEvent>| async move {
            Ok::<_, lambda_runtime::Error>(function.handle_tasks_event(event.payload).await)
        },
    ))
    .await
}
