//! `get_page {page_id}` -> the page's text, structured lines with reconciled task status, and
//! short-lived signed URLs to its ink.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, Revisable, ToolClass, ToolDef, ToolError, if_revision_schema,
    object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::notebook::LineView;

/// A page: its text, its lines and signed links to its ink.
#[derive(Serialize, JsonSchema)]
pub struct PageOutput<'a> {
    page_id: &'a crate::domain::PageId,
    date: crate::domain::Date,
    has_ink: bool,
    ocr_text: Option<&'a str>,
    ocr_markdown: Option<&'a str>,
    /// The OCR engine that read this page's text from its ink; null when the text came with the page.
    ocr_engine: Option<&'a str>,
    structure_json: Structure<'a>,
    pdf_url: Option<&'a str>,
    png_url: Option<&'a str>,
    signed_url_ttl_seconds: u64,
    /// The page's stable link: it shows the page to its owner after sign-in, long after the signed URLs expire.
    page_url: String,
}

#[derive(Serialize, JsonSchema)]
struct Structure<'a> {
    lines: &'a [LineView],
}

pub fn def() -> ToolDef {
    ToolDef {
        name: "get_page",
        title: "Read a notebook page",
        description: "Read one page: its OCR text and markdown, its lines (section, notation, and for task lines the reconciled status, written like the page's own: open, done, cancelled, migrated), and signed links to its PDF/PNG that expire after signed_url_ttl_seconds. Pass the revision of a page you already read as if_revision: if nothing on it changed, the answer is only {unchanged: true, revision}.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(
            json!({
                "page_id": { "type": "string", "description": "A page_id from list_pages or search_pages." },
                "if_revision": if_revision_schema()
            }),
            &["page_id"],
        ),
        output_schema: output_schema::<Revisable<PageOutput>>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let page_id = ctx.args.page_id("page_id")?;
    let if_revision = ctx.args.opt_str("if_revision")?;
    let user = &ctx.principal.user;
    let page = ctx.notebook.page_revision(user, &page_id).await?;
    let revision = page.revision.clone();
    if if_revision == Some(revision.as_str()) {
        return output(&Revisable::<PageOutput>::Unchanged { revision });
    }
    // The same revision answers the same: kept from an earlier read (`notebook::answers`).
    if let Some(kept) = ctx.notebook.answers().get(user, &revision) {
        return Ok(kept);
    }
    let p = ctx.notebook.page_view(user, page).await?;
    let answer = PageOutput {
        page_id: &p.page_id,
        date: p.date,
        has_ink: p.has_ink,
        ocr_text: p.ocr_text.as_deref(),
        ocr_markdown: p.ocr_markdown.as_deref(),
        ocr_engine: p.ocr_engine.as_deref(),
        structure_json: Structure { lines: &p.lines },
        pdf_url: p.pdf_url.as_deref(),
        png_url: p.png_url.as_deref(),
        signed_url_ttl_seconds: p.signed_url_ttl_seconds,
        page_url: ctx.notebook.page_url(&p.page_id),
    };
    let out = output(&Revisable::Full {
        answer,
        revision: revision.clone(),
    })?;
    ctx.notebook.answers().put(user, &revision, &out);
    Ok(out)
}
