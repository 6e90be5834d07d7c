//! Who may send each JSON-RPC request: the one table the HTTP layer consults before the
//! protocol runs, so the handler never decides a 401 or a 403 (a handler cannot set an HTTP
//! status; it used to pass them back as marker errors the HTTP layer searched replies for).

use crate::auth::Scope;
use crate::tools;

/// What a request needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing: the answer reveals nothing (an unknown tool, prompt or URI is the protocol's
    /// own error; a conformance fixture holds no user data; an unknown method or a client's
    /// response is refused by the protocol).
    Nothing,
    /// Discovery (lifecycle, ping, the lists, notifications, the viewer): a token, or none
    /// under `--public-discovery`.
    Discovery,
    /// A token whose scope allows this one.
    Scope(Scope),
}

/// The need of one message: its `method` and, for `tools/call`, `resources/read` and
/// `prompts/get`, the tool or prompt name or the URI it names (`None` for a response).
pub fn need(method: Option<&str>, name: Option<&str>) -> Need {
    let Some(method) = method else {
        return Need::Nothing;
    };
    match method {
        "tools/call" => match name {
            Some(n) if is_fixture_tool(n) => Need::Nothing,
            Some(n) => tools::find(n).map_or(Need::Nothing, |t| Need::Scope(t.scope)),
            None => Need::Nothing,
        },
        "resources/read" => match name {
            Some(super::viewer::VIEWER_URI) => Need::Discovery,
            Some(uri) if super::resources::is_nib_uri(uri) => Need::Scope(Scope::Read),
            _ => Need::Nothing,
        },
        "prompts/get" => match name {
            Some(n) if super::prompts::is_prompt(n) => Need::Scope(Scope::Read),
            _ => Need::Nothing,
        },
        "initialize"
        | "ping"
        | "server/discover"
        | "tools/list"
        | "resources/list"
        | "resources/templates/list"
        | "prompts/list" => Need::Discovery,
        m if m.starts_with("notifications/") => Need::Discovery,
        _ => Need::Nothing,
    }
}

fn is_fixture_tool(name: &str) -> bool {
    super::fixtures::enabled() && super::fixtures::is_tool(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tool_needs_its_catalog_scope() {
        for t in tools::catalog() {
            assert_eq!(need(Some("tools/call"), Some(t.name)), Need::Scope(t.scope));
        }
        assert_eq!(
            need(Some("tools/call"), Some("no_such_tool")),
            Need::Nothing
        );
        assert_eq!(need(Some("tools/call"), None), Need::Nothing);
    }

    #[test]
    fn discovery_answers_without_a_scope_and_reads_need_read() {
        for m in [
            "initialize",
            "ping",
            "tools/list",
            "notifications/initialized",
        ] {
            assert_eq!(need(Some(m), None), Need::Discovery, "{m}");
        }
        assert_eq!(
            need(
                Some("resources/read"),
                Some(super::super::viewer::VIEWER_URI)
            ),
            Need::Discovery
        );
        let page = "nib://pages/01a2332e-b695-765a-972b-c34066d07845";
        assert_eq!(
            need(Some("resources/read"), Some(page)),
            Need::Scope(Scope::Read)
        );
        assert_eq!(
            need(Some("resources/read"), Some("file:///etc/passwd")),
            Need::Nothing
        );
        assert_eq!(
            need(Some("prompts/get"), Some("daily_review")),
            Need::Scope(Scope::Read)
        );
        assert_eq!(need(Some("prompts/get"), Some("nope")), Need::Nothing);
        assert_eq!(need(Some("completion/complete"), None), Need::Nothing);
        assert_eq!(need(None, None), Need::Nothing, "a client's response");
    }
}
