//! `link_tasks {task_link_id, same_as}` and `unlink_tasks {task_link_id, same_as}` ->
//! `{"linked", "changed", "task_link_id", "same_as", "message"}`: two tasks that are
//! the same work written differently become one for reconciliation, and split again.
//!
//! Two tools rather than one with an `unlink` flag: linking merges (destructive: it needs
//! `write` and asks the user first), unlinking only puts back what a link merged (an
//! idempotent edit, like the restores). One tool could carry only one of those annotations and
//! scopes.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::TaskLinkId;
use crate::notebook::LinkActor;

fn input() -> serde_json::Value {
    object_schema(
        json!({
            "task_link_id": { "type": "string", "description": "The task that is kept (a task_link_id from list_tasks or get_page)." },
            "same_as": { "type": "string", "description": "The task written differently on another page that is the same work." }
        }),
        &["task_link_id", "same_as"],
    )
}

pub fn link_def() -> ToolDef {
    ToolDef {
        name: "link_tasks",
        title: "Link two tasks that are the same work",
        description: "Make two tasks that are the same work written differently (\"call dentist\" on one page, \"Call the dentist re: filling\" on another) one task: `same_as` is merged into `task_link_id`. list_tasks shows one task, its status is reconciled across both tasks' lines (a later page ticking either decides), get_task shows every page. The kept task's text and update history stay; unlink_tasks with the same arguments splits them again. Linking tasks already linked changes nothing.",
        scope: Scope::Write,
        class: ToolClass::Tasks,
        annotations: Annotations::DESTRUCTIVE,
        input_schema: input(),
        output_schema: output_schema::<LinkedOut>(),
        handler: |ctx| Box::pin(run(ctx, true)),
    }
}

pub fn unlink_def() -> ToolDef {
    ToolDef {
        name: "unlink_tasks",
        title: "Unlink two linked tasks",
        description: "Undo link_tasks: the lines written as `same_as`'s text become that task again, with its own update history and status reconciled from its own lines. Unlinking tasks that are not linked changes nothing.",
        scope: Scope::Edit,
        class: ToolClass::Tasks,
        annotations: Annotations::IDEMPOTENT_WRITE,
        input_schema: input(),
        output_schema: output_schema::<LinkedOut>(),
        handler: |ctx| Box::pin(run(ctx, false)),
    }
}

/// What the link or unlink did.
#[derive(Serialize, JsonSchema)]
struct LinkedOut<'a> {
    /// True when the tasks are linked after the call (link_tasks), false after unlink_tasks.
    linked: bool,
    /// False when there was nothing to do.
    changed: bool,
    task_link_id: &'a TaskLinkId,
    same_as: &'a TaskLinkId,
    message: String,
}

async fn run(ctx: Ctx<'_>, link: bool) -> Result<Output, ToolError> {
    let id = ctx.args.task_link_id("task_link_id")?;
    let same_as = ctx.args.task_link_id("same_as")?;
    let actor = LinkActor {
        tool: if link { "link_tasks" } else { "unlink_tasks" },
        client: ctx.principal.client.clone(),
    };
    let user = &ctx.principal.user;
    let done = if link {
        ctx.notebook.link_tasks(user, &id, &same_as, &actor).await?
    } else {
        ctx.notebook
            .unlink_tasks(user, &id, &same_as, &actor)
            .await?
    };
    let message = match (link, done.changed) {
        (true, true) => format!(
            "Task {same_as} is now part of task {id}: one status across their pages. Undo with unlink_tasks."
        ),
        (true, false) => format!("Task {same_as} was part of task {id} already."),
        (false, true) => format!("Task {same_as} is a task of its own again."),
        (false, false) => format!("Task {same_as} was not linked into task {id}."),
    };
    output(&LinkedOut {
        linked: link,
        changed: done.changed,
        task_link_id: &id,
        same_as: &same_as,
        message,
    })
}
