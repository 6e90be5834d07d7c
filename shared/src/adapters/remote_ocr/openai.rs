//! `OpenAiOcr`: the `Ocr` port over an OpenAI-compatible chat-completions endpoint with image
//! input (`NIB_OCR=openai`): a local Ollama, llama.cpp or vLLM server, or a cloud API.
//!
//! Each page is one `POST {base}/chat/completions`: a user message whose content is a text
//! part (the [`PROMPT`]: the page as markdown, one line per handwritten line, nib's marks,
//! no commentary) and an `image_url` part holding the page as `data:image/png;base64,...`,
//! the PNG encoded from the same grey pixels every engine reads. `temperature` 0: a
//! transcription, not a composition. The key, when there is one, goes as
//! `Authorization: Bearer`. The answer is `choices[0].message.content`, a string (or, from
//! some servers, an array of text parts, joined).
//!
//! The answer is markdown, not boxes: [`Ocr::writes_markdown`] says so, and `ocr::read` reads
//! each line's marks (`ocr::layout::from_markdown`) instead of running the layout analysis.
//! Checkboxes are then the model's reading of the page, not found in the pixels. The model
//! gives no confidence, so every line gets 1.0 (none is marked unsure).
//!
//! Tested against a stand-in (`nib_testkit::openai_standin`); not against a real server.

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::{Caller, RemoteOcrError, page_png};
use crate::config::{OpenAiOcrConfig, Secret};
use crate::ports::{Ocr, OcrBox, OcrEngine, OcrError, OcrLine, PageImage};

/// The provider's name in errors and logs.
pub const PROVIDER: &str = "openai-compatible";
/// The largest PNG sent: OpenAI's limit on an image is 20 MB; local servers take less, and
/// the base64 in the JSON body is a third larger again.
pub const MAX_PNG_BYTES: usize = 15 * 1024 * 1024;

/// What the model is asked. Kept plain so that small local models follow it too.
pub const PROMPT: &str = "Transcribe this handwritten notebook page as markdown. \
Write one line of output for each handwritten line, top to bottom, keeping the words as written. \
Start a heading with \"# \". Write a task with a checkbox as \"- [ ] \" when the box is empty \
and \"- [x] \" when it is ticked or crossed. Start any other bulleted line with \"- \". \
Write everything else as plain text. Answer with the markdown only: no commentary, no code \
fences.";

/// An OpenAI-compatible vision model behind the `Ocr` port. `Debug` redacts the key.
#[derive(Debug, Clone)]
pub struct OpenAiOcr {
    url: String,
    model: String,
    api_key: Option<Secret>,
    caller: Caller,
}

impl OpenAiOcr {
    pub fn new(config: &OpenAiOcrConfig) -> OpenAiOcr {
        OpenAiOcr {
            url: format!("{}/chat/completions", config.base_url),
            model: config.model.clone(),
            api_key: config.api_key.clone(),
            caller: Caller::new(PROVIDER, config.policy),
        }
    }
}

#[async_trait]
impl Ocr for OpenAiOcr {
    fn engine(&self) -> OcrEngine {
        // The model is what reads: a page records which one.
        OcrEngine {
            name: "openai-compatible".into(),
            version: self.model.clone(),
        }
    }

    fn writes_markdown(&self) -> bool {
        true
    }

    async fn recognize(&self, page: &PageImage) -> Result<Vec<OcrLine>, OcrError> {
        let png = page_png(page, PROVIDER, MAX_PNG_BYTES)?;
        let body = json!({
            "model": self.model,
            "temperature": 0,
            "messages": [{
                "role": "user",
                "content": [
                    { "type": "text", "text": PROMPT },
                    {
                        "type": "image_url",
                        "image_url": { "url": format!("data:image/png;base64,{}", BASE64.encode(&png)) }
                    }
                ]
            }]
        });
        drop(png);
        let bearer = self
            .api_key
            .as_ref()
            .map(|k| format!("Bearer {}", k.expose()));
        let headers: Vec<(&str, &str)> = bearer
            .as_deref()
            .map(|b| ("authorization", b))
            .into_iter()
            .collect();
        let answer = self.caller.post_json(&self.url, &headers, &body).await?;
        let markdown = content(&answer).ok_or(RemoteOcrError::BadAnswer {
            provider: PROVIDER,
            status: 200,
        })?;
        Ok(vec![OcrLine {
            text: markdown,
            confidence: 1.0,
            bbox: OcrBox::default(),
        }])
    }
}

/// `choices[0].message.content`: a string, or an array of parts whose text parts are joined.
fn content(answer: &Value) -> Option<String> {
    let content = answer.pointer("/choices/0/message/content")?;
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        // A model that answered nothing (`null`): a page without text.
        Value::Null => Some(String::new()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_content_is_a_string_or_text_parts() {
        let s = json!({"choices": [{"message": {"role": "assistant", "content": "# A\n- b"}}]});
        assert_eq!(content(&s).as_deref(), Some("# A\n- b"));
        let parts = json!({"choices": [{"message": {"content": [
            {"type": "text", "text": "# A"}, {"type": "text", "text": "- b"}
        ]}}]});
        assert_eq!(content(&parts).as_deref(), Some("# A\n- b"));
        assert_eq!(content(&json!({"choices": []})), None);
        assert_eq!(
            content(&json!({"choices": [{"message": {"content": 3}}]})),
            None
        );
    }

    #[test]
    fn debug_never_shows_the_key() {
        let ocr = OpenAiOcr::new(&OpenAiOcrConfig {
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "m".into(),
            api_key: Some(Secret::new("sk-do-not-print")),
            policy: Default::default(),
        });
        assert!(!format!("{ocr:?}").contains("sk-do-not-print"));
    }
}
