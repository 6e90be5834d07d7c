//! `export_notebook {format}` ->
//! `{"download_url","expires_in_seconds","format","file_name","pages","tasks","ink_files"}`:
//! the whole notebook as a bundle (re-importable) or a Markdown ZIP, handed over as a link.
//!
//! **Only the owner's web app calls it** (an app operation, [`super::app_operations`]): no MCP
//! client lists or calls it, whatever its scope. A link to everything, ink included, is
//! what a model following an instruction planted in a page would want; a person downloading
//! their data is at the browser anyway ("Your data", behind the strict cookie), and the CLI
//! has `nib export`. Each export is recorded with every page and task it wrote, and counted
//! against its own limit (`http::app::data`).
//!
//! On AWS the pages function writes the archive to S3 (`exports/{user}/{random}.zip`, deleted
//! by a lifecycle rule a day later) and answers a presigned GET that downloads it as an
//! attachment for [`EXPORT_TTL_SECONDS`]: a Lambda response cannot carry a whole notebook.
//! Locally the archive is the user's to write where they like, so the tool says to use
//! `nib export` or the web app's download (Your data), which streams it.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::notebook::{BundleError, ExportFormat};

/// How long an export's link works.
pub const EXPORT_TTL_SECONDS: u64 = 900;

/// Locally there is no link to hand out.
pub const NO_DOWNLOAD_HERE: &str = "this server hands out no export links: export with `nib export` (or `nib export --format markdown`), or download from the web app's Your data screen";

pub fn def() -> ToolDef {
    ToolDef {
        name: "export_notebook",
        title: "Export the notebook",
        description: "Export the whole notebook for download: `bundle` (the default) is the re-importable nib-bundle ZIP (`nib import --bundle`), `markdown` a ZIP with one .md per page and its image. Answers a download link that works for 15 minutes; the file holds the notebook's content in the clear. Nothing in the notebook changes.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        // A new link each time, so not idempotent; the notebook is only read.
        annotations: Annotations {
            read_only: true,
            destructive: false,
            idempotent: false,
            open_world: false,
        },
        input_schema: object_schema(
            json!({
                "format": {
                    "type": "string",
                    "enum": ExportFormat::NAMES,
                    "default": "bundle",
                    "description": "bundle (re-importable) or markdown (for reading)."
                }
            }),
            &[],
        ),
        output_schema: output_schema::<Exported>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// The export, ready to download.
#[derive(Serialize, JsonSchema)]
struct Exported<'a> {
    /// Downloads the ZIP until it expires; anyone holding it can, so keep it to yourself.
    download_url: &'a str,
    expires_in_seconds: u64,
    format: &'static str,
    /// The name the download is saved under.
    file_name: &'a str,
    pages: u64,
    tasks: u64,
    ink_files: u64,
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let name = ctx
        .args
        .choice("format", &ExportFormat::NAMES, Some("bundle"))?;
    let format = ExportFormat::parse(name).unwrap_or(ExportFormat::Bundle);
    let download = ctx
        .notebook
        .export_download(&ctx.principal.user, format, EXPORT_TTL_SECONDS)
        .await
        .map_err(|e| match e {
            BundleError::Notebook(e) => ToolError::from(e),
            e => ToolError::Unavailable(Box::new(e)),
        })?
        .ok_or_else(|| ToolError::Rejected(NO_DOWNLOAD_HERE.into()))?;
    // Every id the archive holds, in as many records as that takes; the call's own record
    // (from its result) would name none (`UNRECORDED`).
    ctx.notebook.access_log().record_all(
        &ctx.principal.user,
        &ctx.principal.credential_id,
        ctx.principal.client.as_deref(),
        "export_notebook",
        &download.report.page_ids,
        &download.report.task_ids,
    );
    output(&Exported {
        download_url: &download.url,
        expires_in_seconds: EXPORT_TTL_SECONDS,
        format: format.as_str(),
        file_name: &download.file_name,
        pages: download.report.pages,
        tasks: download.report.tasks,
        ink_files: download.report.ink_files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_says_how_long_the_link_works() {
        let minutes = EXPORT_TTL_SECONDS / 60;
        assert!(
            def()
                .description
                .contains(&format!("works for {minutes} minutes")),
            "{}",
            def().description
        );
    }
}
