//! `get_page {page_id}` -> the page's text, structured lines with reconciled task status, and
//! short-lived signed URLs to its ink.

use serde_json::{Value, json};

use super::{
    Ctx, ToolClass, ToolDef, ToolError, if_revision_schema, nullable, object_schema, revisable,
    unchanged, with_revision,
};
use crate::auth::Scope;
use crate::notebook::Revised;

pub fn def() -> ToolDef {
    let line = object_schema(
        json!({
            "line_id": { "type": "string" },
            "text": { "type": "string" },
            "section": nullable("string"),
            "notation": { "type": "string", "enum": ["heading", "task", "bullet", "text"] },
            "status": { "type": ["string", "null"], "enum": ["open", "done", "migrated", "cancelled", null], "description": "A task line's effective status, in the page's vocabulary like page_status (an open task is open)." },
            "page_status": { "type": ["string", "null"], "enum": ["open", "done", "migrated", "cancelled", null] },
            "status_source": { "type": ["string", "null"], "enum": ["page", "reconciled", null] },
            "completed_date": nullable("string"),
            "notion_url": nullable("string"),
            "task_link_id": { "type": ["string", "null"], "description": "A task line's task, for update_task_status; null for other lines." },
            "ocr_confidence": { "type": ["number", "null"], "description": "For a line read from the ink by OCR: how sure the engine was (0..1). Below 0.75 the line is unsure: say you could not read it well rather than trusting every word." }
        }),
        &[
            "line_id",
            "text",
            "section",
            "notation",
            "status",
            "page_status",
            "status_source",
            "completed_date",
            "notion_url",
            "task_link_id",
            "ocr_confidence",
        ],
    );
    ToolDef {
        name: "get_page",
        title: "Read a notebook page",
        description: "Read one page: its OCR text and markdown, its lines (section, notation, and for task lines the reconciled status, written like the page's own: open, done, cancelled, migrated), and signed links to its PDF/PNG that expire after signed_url_ttl_seconds. Pass the revision of a page you already read as if_revision: if nothing on it changed, the answer is only {unchanged: true, revision}.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({
                "page_id": { "type": "string", "description": "A page_id from list_pages or search_pages." },
                "if_revision": if_revision_schema()
            }),
            &["page_id"],
        ),
        output_schema: revisable(object_schema(
            json!({
                "page_id": { "type": "string" },
                "date": { "type": "string" },
                "has_ink": { "type": "boolean" },
                "ocr_text": nullable("string"),
                "ocr_markdown": nullable("string"),
                "ocr_engine": { "type": ["string", "null"], "description": "The OCR engine that read this page's text from its ink; null when the text came with the page." },
                "structure_json": object_schema(json!({ "lines": { "type": "array", "items": line } }), &["lines"]),
                "pdf_url": nullable("string"),
                "png_url": nullable("string"),
                "signed_url_ttl_seconds": { "type": "integer" },
                "page_url": { "type": "string", "description": "The page's stable link: it shows the page to its owner after sign-in, long after the signed URLs expire." }
            }),
            &[
                "page_id",
                "date",
                "has_ink",
                "ocr_text",
                "ocr_markdown",
                "ocr_engine",
                "structure_json",
                "pdf_url",
                "png_url",
                "signed_url_ttl_seconds",
                "page_url",
            ],
        )),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let page_id = ctx.args.page_id("page_id")?;
    let if_revision = ctx.args.opt_str("if_revision")?;
    let (p, revision) = match ctx
        .notebook
        .get_page_if(&ctx.principal.user, &page_id, if_revision)
        .await?
    {
        Revised::Unchanged { revision } => return Ok(unchanged(revision)),
        Revised::Full { value, revision } => (value, revision),
    };
    let answer = json!({
        "page_id": p.page_id,
        "date": p.date,
        "has_ink": p.has_ink,
        "ocr_text": p.ocr_text,
        "ocr_markdown": p.ocr_markdown,
        "ocr_engine": p.ocr_engine,
        "structure_json": { "lines": p.lines },
        "pdf_url": p.pdf_url,
        "png_url": p.png_url,
        "signed_url_ttl_seconds": p.signed_url_ttl_seconds,
        "page_url": ctx.notebook.page_url(&p.page_id),
    });
    Ok(with_revision(answer, revision))
}
