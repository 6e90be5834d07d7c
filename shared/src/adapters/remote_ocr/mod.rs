//! Remote OCR providers the operator brings (issue 46): an OpenAI-compatible chat-completions
//! endpoint with image input ([`openai`]) and Google Cloud Vision ([`google_vision`]), both
//! behind the [`crate::ports::Ocr`] port like the local engine and Textract.
//!
//! What they share is here: one HTTP client with a timeout per request and no redirects, and
//! [`Caller::post_json`], which tries a page up to `attempts` times on what may pass (429,
//! 5xx, a timeout, no connection), pausing `backoff`, then twice that, ... or the
//! `Retry-After` the provider sent, in seconds or as an HTTP date (RFC 9110 §10.2.3; past
//! [`crate::config::MAX_RETRY_AFTER`] the page is given up). Any other answer is final. Errors ([`RemoteOcrError`]) carry the provider's name and HTTP status,
//! never the body (a provider may echo the page's text) nor the URL or key; the caller logs
//! them with the page's id (`notebook::ocr`), and the page is stored unread, for `nib ocr`.

pub mod google_vision;
pub mod openai;

use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::config::{MAX_RETRY_AFTER, RemoteCallPolicy};
use crate::ports::OcrError;

/// Why a call to a remote provider failed: the source of `OcrError::Failed`/`Unavailable`.
/// Nothing here holds what the provider answered beyond its status.
#[derive(Debug, thiserror::Error)]
pub enum RemoteOcrError {
    #[error("{provider} answered HTTP {status} after {attempts} attempt(s)")]
    Status {
        provider: &'static str,
        status: u16,
        attempts: u32,
    },
    #[error("{provider}: {reason} after {attempts} attempt(s)")]
    Transport {
        provider: &'static str,
        reason: &'static str,
        attempts: u32,
    },
    /// A 2xx whose body is not the documented shape.
    #[error("{provider} answered HTTP {status} with a body that is not the documented shape")]
    BadAnswer { provider: &'static str, status: u16 },
    /// The provider's own error inside a 2xx (Vision's per-image `error`): its numeric code.
    #[error("{provider} could not read the page (error code {code})")]
    Refused { provider: &'static str, code: i64 },
}

impl RemoteOcrError {
    /// The provider's HTTP status, when it answered one.
    pub fn status(&self) -> Option<u16> {
        match self {
            RemoteOcrError::Status { status, .. } | RemoteOcrError::BadAnswer { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }
}

impl From<RemoteOcrError> for OcrError {
    fn from(e: RemoteOcrError) -> Self {
        match e {
            // The key, the model or the URL is wrong: a setting to fix, not this page.
            RemoteOcrError::Status {
                status: 401 | 403 | 404,
                ..
            } => OcrError::Unavailable(e.to_string()),
            other => OcrError::Failed(Box::new(other)),
        }
    }
}

/// One provider's HTTP client and call policy.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    provider: &'static str,
    http: reqwest::Client,
    policy: RemoteCallPolicy,
}

impl Caller {
    pub(crate) fn new(provider: &'static str, policy: RemoteCallPolicy) -> Caller {
        let http = reqwest::Client::builder()
            .connect_timeout(policy.timeout.min(Duration::from_secs(10)))
            .timeout(policy.timeout)
            // A redirect would resend the key to wherever it points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a reqwest client builds");
        Caller {
            provider,
            http,
            policy,
        }
    }

    /// POSTs `body` to `url` with `headers` until an answer that is final, and returns a 2xx
    /// answer's JSON.
    pub(crate) async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Result<Value, RemoteOcrError> {
        // Serialised once: a page is megabytes, and each try sends the same bytes.
        let body = bytes::Bytes::from(serde_json::to_vec(body).expect("JSON serialises"));
        let mut pause = self.policy.backoff;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut req = self
                .http
                .post(url)
                .header("content-type", "application/json")
                .body(body.clone());
            for (name, value) in headers {
                req = req.header(*name, *value);
            }
            let (retry_after, failure) = match req.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    if (200..300).contains(&status) {
                        let bytes = resp
                            .bytes()
                            .await
                            .map_err(|e| self.transport(&e, attempt))?;
                        return serde_json::from_slice(&bytes).map_err(|_| {
                            RemoteOcrError::BadAnswer {
                                provider: self.provider,
                                status,
                            }
                        });
                    }
                    let retry_after = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| retry_after(v, SystemTime::now()));
                    let failure = RemoteOcrError::Status {
                        provider: self.provider,
                        status,
                        attempts: attempt,
                    };
                    if !(status == 429 || status >= 500) {
                        return Err(failure);
                    }
                    (retry_after, failure)
                }
                Err(e) => (None, self.transport(&e, attempt)),
            };
            if attempt >= self.policy.attempts {
                return Err(failure);
            }
            let Some(wait) = wait_before_retry(retry_after, pause) else {
                return Err(failure);
            };
            tracing::debug!(
                provider = self.provider,
                attempt,
                wait_ms = wait.as_millis() as u64,
                "remote OCR call will be tried again"
            );
            tokio::time::sleep(wait).await;
            pause = pause.saturating_mul(2);
        }
    }

    /// A request that got no answer, by kind only: reqwest's error would name the URL.
    fn transport(&self, e: &reqwest::Error, attempts: u32) -> RemoteOcrError {
        let reason = if e.is_timeout() {
            "timed out"
        } else if e.is_connect() {
            "cannot connect"
        } else {
            "the connection failed"
        };
        RemoteOcrError::Transport {
            provider: self.provider,
            reason,
            attempts,
        }
    }
}

/// How long a `Retry-After` value asks to wait (RFC 9110 §10.2.3): delay-seconds, or an
/// HTTP-date counted from `now` (a date already past asks for no wait). `None` when it is
/// neither, as when there is none: the backoff applies. Proxies and some providers send the
/// date form; reading only seconds would retry those at once.
fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    // IMF-fixdate, and the obsolete RFC 850 and asctime forms a recipient must accept.
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The pause before the next try: what the provider asked for, else `backoff`; `None` (give
/// the page up now rather than after the wait) when it asked for longer than we hold a page.
fn wait_before_retry(asked: Option<Duration>, backoff: Duration) -> Option<Duration> {
    match asked {
        Some(wait) if wait > MAX_RETRY_AFTER => None,
        Some(wait) => Some(wait),
        None => Some(backoff),
    }
}

/// The page as PNG for a provider that takes at most `max_bytes`, or why it cannot go.
pub(crate) fn page_png(
    page: &crate::ports::PageImage,
    provider: &str,
    max_bytes: usize,
) -> Result<Vec<u8>, OcrError> {
    let (w, h) = (page.width, page.height);
    if w == 0 || h == 0 || page.gray.len() as u64 != u64::from(w) * u64::from(h) {
        return Err(OcrError::BadImage(format!(
            "a {w}x{h} page with {} bytes of pixels",
            page.gray.len()
        )));
    }
    let png = crate::ocr::raster::to_png(page);
    if png.len() > max_bytes {
        return Err(OcrError::BadImage(format!(
            "the page is {} bytes as PNG; {provider} is sent at most {max_bytes}",
            png.len()
        )));
    }
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1994-11-06 08:49:37 UTC, RFC 9110's example date.
    fn example_date() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777)
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_as_an_http_date() {
        let now = example_date() - Duration::from_secs(20);
        let secs = Duration::from_secs;
        assert_eq!(retry_after("120", now), Some(secs(120)));
        assert_eq!(retry_after(" 0 ", now), Some(secs(0)));
        // The three forms of an HTTP date (RFC 9110 §5.6.7), counted from now.
        for date in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(retry_after(date, now), Some(secs(20)), "{date}");
        }
        // A date already past: try again now.
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT", example_date() + secs(5)),
            Some(Duration::ZERO)
        );
        for junk in ["", "soon", "-1", "1.5", "Sun, 32 Nov 1994 08:49:37 GMT"] {
            assert_eq!(retry_after(junk, now), None, "{junk:?}");
        }
    }

    #[test]
    fn a_wait_past_the_cap_gives_the_page_up_whichever_form_asked_for_it() {
        let backoff = Duration::from_millis(500);
        assert_eq!(wait_before_retry(None, backoff), Some(backoff));
        assert_eq!(
            wait_before_retry(Some(MAX_RETRY_AFTER), backoff),
            Some(MAX_RETRY_AFTER)
        );
        let now = example_date() - MAX_RETRY_AFTER - Duration::from_secs(1);
        let asked = retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now);
        assert_eq!(asked, Some(MAX_RETRY_AFTER + Duration::from_secs(1)));
        assert_eq!(wait_before_retry(asked, backoff), None);
        let asked = retry_after(&(MAX_RETRY_AFTER.as_secs() + 1).to_string(), now);
        assert_eq!(wait_before_retry(asked, backoff), None);
    }
}
