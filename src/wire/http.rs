//! How a message travels on Streamable HTTP (docs/spec/mcp-2026-07-28.md §5.2, §8): the headers of the POST that
//! carries it, and the status an error response comes with. One place, so that the clients
//! that send POSTs, the recorders that write their headers into traces and the oracle rules
//! that judge them agree.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{codes, Message, PROTOCOL_VERSION};

/// The `Accept` header of every POST: both response forms (§5.2).
pub const ACCEPT: &str = "application/json, text/event-stream";

/// The method of one HTTP exchange with the endpoint: a `POST` carries a message; in the
/// legacy era a `GET` opens a stream for the server's messages (or resumes one) and a
/// `DELETE` ends the session (docs/spec/mcp-2025-11-25.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// `POST`: a message.
    Post,
    /// `GET`: a stream without a message.
    Get,
    /// `DELETE`: the session's end.
    Delete,
}

impl Method {
    /// The method's name on the wire (and in a trace's `open` event).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Post => "POST",
            Method::Get => "GET",
            Method::Delete => "DELETE",
        }
    }

    /// The method named `name`, if it is one of the three.
    pub fn parse(name: &str) -> Option<Method> {
        match name {
            "POST" => Some(Method::Post),
            "GET" => Some(Method::Get),
            "DELETE" => Some(Method::Delete),
            _ => None,
        }
    }
}

/// The legacy era's session header, as traces record it (lower case).
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The header names a recorder keeps (lower case): the ones the rules judge.
pub const RECORDED: [&str; 7] = [
    "accept",
    "content-type",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "mcp-session-id",
    "last-event-id",
];

/// The value `Mcp-Name` must carry for a request, where the header is required: `params.name`
/// for `tools/call` and `prompts/get`, `params.uri` for `resources/read`, `params.taskId` for
/// the Tasks extension's `tasks/get`, `tasks/update` and `tasks/cancel`.
pub fn name_header(method: &str, params: &serde_json::Map<String, Value>) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    params.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Whether `method` requires `Mcp-Name`.
pub fn name_required(method: &str) -> bool {
    matches!(
        method,
        "tools/call"
            | "prompts/get"
            | "resources/read"
            | "tasks/get"
            | "tasks/update"
            | "tasks/cancel"
    )
}

/// The headers a compliant client puts on the POST carrying `msg` (names in lower case).
/// Notifications get `Accept`, `Content-Type` and `MCP-Protocol-Version` only: the header rules
/// for them are left undefined.
pub fn request_headers(msg: &Message) -> BTreeMap<String, String> {
    let mut h = BTreeMap::new();
    h.insert("content-type".into(), "application/json".into());
    h.insert("accept".into(), ACCEPT.into());
    let version = match msg {
        Message::Request(r) => r.meta.protocol_version.to_string(),
        _ => PROTOCOL_VERSION.into(),
    };
    h.insert("mcp-protocol-version".into(), version);
    if let Message::Request(r) = msg {
        h.insert("mcp-method".into(), r.method.to_string());
        if let Some(name) = name_header(&r.method, &r.params) {
            h.insert("mcp-name".into(), name);
        }
    }
    h
}

/// What is wrong with the headers of the POST that carried the request with `method`,
/// `protocol_version` and `params`, if anything: the first missing or mismatched header.
/// Names are compared without case, values exactly.
pub fn header_mismatch(
    headers: &BTreeMap<String, String>,
    method: &str,
    protocol_version: Option<&str>,
    params: &serde_json::Map<String, Value>,
) -> Option<String> {
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let accept = get("accept").unwrap_or_default().to_ascii_lowercase();
    if !(accept.contains("application/json") && accept.contains("text/event-stream")) {
        return Some(format!(
            "Accept {:?} does not list both application/json and text/event-stream",
            get("accept").unwrap_or("")
        ));
    }
    match (get("mcp-protocol-version"), protocol_version) {
        (None, _) => return Some("MCP-Protocol-Version is missing".into()),
        (Some(h), Some(b)) if h != b => {
            return Some(format!(
                "MCP-Protocol-Version {h:?} differs from the body's protocolVersion {b:?}"
            ))
        }
        _ => {}
    }
    match get("mcp-method") {
        None => return Some("Mcp-Method is missing".into()),
        Some(h) if h != method => {
            return Some(format!(
                "Mcp-Method {h:?} differs from the body's method {method:?}"
            ))
        }
        _ => {}
    }
    if name_required(method) {
        let want = name_header(method, params);
        match (get("mcp-name"), want) {
            (None, _) => return Some(format!("Mcp-Name is missing (required for {method})")),
            (Some(h), Some(w)) if h != w => {
                return Some(format!("Mcp-Name {h:?} differs from the body's {w:?}"))
            }
            _ => {}
        }
    }
    None
}

/// The HTTP status an error response with `code` must come with on Streamable HTTP, where §8
/// fixes one: -32601 with 404; -32020, -32021 and -32022 with 400.
pub fn status_for_code(code: i64) -> Option<u16> {
    match code {
        codes::METHOD_NOT_FOUND => Some(404),
        codes::HEADER_MISMATCH
        | codes::MISSING_REQUIRED_CLIENT_CAPABILITY
        | codes::UNSUPPORTED_PROTOCOL_VERSION => Some(400),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Request, RequestId};

    #[test]
    fn a_compliant_post_has_no_mismatch_and_each_fault_is_named() {
        let mut r = Request::new(RequestId::Number(1), "tools/call");
        r.params.insert("name".into(), "slow_op".into());
        let msg = Message::Request(r.clone());
        let h = request_headers(&msg);
        let check = |h: &BTreeMap<String, String>| {
            header_mismatch(h, &r.method, Some(&r.meta.protocol_version), &r.params)
        };
        assert_eq!(check(&h), None);
        for (name, value, says) in [
            ("mcp-method", Some("tools/list"), "Mcp-Method"),
            ("mcp-method", None, "Mcp-Method is missing"),
            ("mcp-name", Some("other"), "Mcp-Name"),
            (
                "mcp-protocol-version",
                Some("2025-11-25"),
                "MCP-Protocol-Version",
            ),
            ("accept", Some("application/json"), "Accept"),
        ] {
            let mut bad = h.clone();
            match value {
                Some(v) => bad.insert(name.into(), v.into()),
                None => bad.remove(name),
            };
            assert!(check(&bad).is_some_and(|m| m.contains(says)), "{name}");
        }
        assert_eq!(status_for_code(codes::METHOD_NOT_FOUND), Some(404));
        assert_eq!(status_for_code(codes::HEADER_MISMATCH), Some(400));
        assert_eq!(status_for_code(codes::INTERNAL_ERROR), None);
    }
}
