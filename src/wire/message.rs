//! Typed MCP 2026-07-28 messages.
//!
//! The six variants of [`Message`] are the six kinds the oracle and the `decode` command speak
//! of: a request, `notifications/progress`, `notifications/cancelled`, any other notification,
//! a result response and an error response (docs/spec/mcp-2026-07-28.md §1.1). Free-form parts (tool arguments,
//! result content, `_meta` extras) stay `serde_json` maps; the parts the progress, cancellation
//! and timeout rules depend on are typed.
//!
//! Unknown members inside `notifications/progress` and `notifications/cancelled` params are not
//! kept: the schema gives them no meaning and the trace keeps the original JSON anyway.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{ProgressToken, RequestId};

/// The protocol revision this crate implements.
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// `_meta` key carrying the request's protocol version (required on every request, §1.5).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the request's client capabilities (required on every request, §1.5).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key tagging a notification with its `subscriptions/listen` id (§7.1).
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// `_meta` key opting a request into progress (§2.1).
pub const META_PROGRESS_TOKEN: &str = "progressToken";

/// Method name of progress notifications.
pub const METHOD_PROGRESS: &str = "notifications/progress";
/// Method name of cancellation notifications.
pub const METHOD_CANCELLED: &str = "notifications/cancelled";
/// Method name of the long-lived subscription request.
pub const METHOD_LISTEN: &str = "subscriptions/listen";
/// Method name of the subscription acknowledgement notification.
pub const METHOD_SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
/// Method name of tool calls.
pub const METHOD_TOOLS_CALL: &str = "tools/call";
/// Method name of the Tasks extension's status poll (§7.3).
pub const METHOD_TASKS_GET: &str = "tasks/get";
/// Method name of the Tasks extension's cancellation request (§7.3).
pub const METHOD_TASKS_CANCEL: &str = "tasks/cancel";
/// Method name of the Tasks extension's input request during a task (§7.3).
pub const METHOD_TASKS_UPDATE: &str = "tasks/update";
/// The Tasks extension's identifier, declared per request under
/// `clientCapabilities.extensions` (§7.3).
pub const EXTENSION_TASKS: &str = "io.modelcontextprotocol/tasks";
/// The methods that may answer with an `InputRequiredResult` (§7.2).
pub const MRTR_METHODS: &[&str] = &["tools/call", "prompts/get", "resources/read"];

/// Any MCP 2026-07-28 message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request (client to server only).
    Request(Request),
    /// A `notifications/progress` notification (server to client only).
    Progress(Progress),
    /// A `notifications/cancelled` notification.
    Cancelled(Cancelled),
    /// Any other notification.
    Notification(Notification),
    /// A result response.
    Result(ResultResponse),
    /// An error response.
    Error(ErrorResponse),
}

/// The kind of a [`Message`], as named in verdicts and traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MessageKind {
    /// A request.
    Request,
    /// A progress notification.
    Progress,
    /// A cancellation notification.
    Cancelled,
    /// Any other notification.
    Notification,
    /// A result response.
    Result,
    /// An error response.
    Error,
}

impl MessageKind {
    /// `request`, `progress`, `cancelled`, `notification`, `result` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Request => "request",
            MessageKind::Progress => "progress",
            MessageKind::Cancelled => "cancelled",
            MessageKind::Notification => "notification",
            MessageKind::Result => "result",
            MessageKind::Error => "error",
        }
    }
}

impl Message {
    /// The kind of this message.
    pub fn kind(&self) -> MessageKind {
        match self {
            Message::Request(_) => MessageKind::Request,
            Message::Progress(_) => MessageKind::Progress,
            Message::Cancelled(_) => MessageKind::Cancelled,
            Message::Notification(_) => MessageKind::Notification,
            Message::Result(_) => MessageKind::Result,
            Message::Error(_) => MessageKind::Error,
        }
    }

    /// The id of a request or response (`None` for notifications and id-less errors).
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Message::Request(r) => Some(&r.id),
            Message::Result(r) => Some(&r.id),
            Message::Error(e) => e.id.as_ref(),
            _ => None,
        }
    }

    /// Whether this is a final response (result or error) for a request.
    pub fn is_response(&self) -> bool {
        matches!(self, Message::Result(_) | Message::Error(_))
    }
}

/// A JSON-RPC request with the `_meta` every MCP 2026-07-28 request carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The request id.
    pub id: RequestId,
    /// The method, e.g. `tools/call`. Borrowed when it is one of [`KNOWN_METHODS`], so
    /// decoding the usual requests allocates nothing for it.
    pub method: Cow<'static, str>,
    /// `params._meta`, which is required (§1.5).
    pub meta: RequestMeta,
    /// Every member of `params` except `_meta`.
    pub params: Map<String, Value>,
}

impl Request {
    /// A request with the given id and method, current-revision `_meta` and no other params.
    pub fn new(id: impl Into<RequestId>, method: impl Into<Cow<'static, str>>) -> Self {
        Request {
            id: id.into(),
            method: method.into(),
            meta: RequestMeta::new(),
            params: Map::new(),
        }
    }

    /// A `tools/call` request for `name` with `arguments`.
    pub fn tools_call(id: impl Into<RequestId>, name: &str, arguments: Value) -> Self {
        let mut r = Request::new(id, METHOD_TOOLS_CALL);
        r.params.insert("name".into(), Value::from(name));
        r.params.insert("arguments".into(), arguments);
        r
    }

    /// Sets `_meta.progressToken`.
    pub fn with_progress_token(mut self, token: impl Into<ProgressToken>) -> Self {
        self.meta.progress_token = Some(token.into());
        self
    }

    /// The progress token, if the request opted into progress.
    pub fn progress_token(&self) -> Option<&ProgressToken> {
        self.meta.progress_token.as_ref()
    }

    /// Whether this request declares the Tasks extension in its own `clientCapabilities`
    /// (negotiation is per request, §7.3).
    pub fn declares_tasks(&self) -> bool {
        self.meta
            .client_capabilities
            .get("extensions")
            .and_then(Value::as_object)
            .is_some_and(|e| e.contains_key(EXTENSION_TASKS))
    }

    /// Declares the Tasks extension in this request's `clientCapabilities`.
    pub fn declare_tasks(&mut self) {
        let extensions = self
            .meta
            .client_capabilities
            .entry("extensions")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(e) = extensions {
            e.insert(EXTENSION_TASKS.into(), Value::Object(Map::new()));
        }
    }
}

/// `params._meta` of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestMeta {
    /// `io.modelcontextprotocol/protocolVersion`. Borrowed when it is [`PROTOCOL_VERSION`],
    /// as nearly every request's is, so decoding one allocates nothing for it.
    pub protocol_version: Cow<'static, str>,
    /// `io.modelcontextprotocol/clientCapabilities`.
    pub client_capabilities: Map<String, Value>,
    /// `progressToken`, when the client opts into progress.
    pub progress_token: Option<ProgressToken>,
    /// Every other `_meta` member (client info, log level, trace context, ...).
    pub other: Map<String, Value>,
    /// The request has the legacy era's shape: `_meta` carries none of the modern keys (the
    /// decoder reading the legacy shapes sets it, and the encoder then writes that shape).
    pub legacy: bool,
}

impl RequestMeta {
    /// `_meta` for this revision with no capabilities and no progress token.
    pub fn new() -> Self {
        RequestMeta {
            protocol_version: Cow::Borrowed(PROTOCOL_VERSION),
            client_capabilities: Map::new(),
            progress_token: None,
            other: Map::new(),
            legacy: false,
        }
    }
}

/// Request methods a decoded [`Request`] holds without allocating.
pub const KNOWN_METHODS: &[&str] = &[
    METHOD_TOOLS_CALL,
    METHOD_TASKS_GET,
    METHOD_TASKS_CANCEL,
    METHOD_TASKS_UPDATE,
    METHOD_LISTEN,
    "tools/list",
    "resources/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "ping",
];

/// A request method as [`Request`] keeps it: one of [`KNOWN_METHODS`] borrowed, any other
/// owned.
pub fn request_method_of(m: &str) -> Cow<'static, str> {
    match KNOWN_METHODS.iter().find(|k| **k == m) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(m.to_owned()),
    }
}

/// A protocol version as [`RequestMeta`] keeps it: the current revision borrowed, any other
/// owned.
pub fn protocol_version_of(v: &str) -> Cow<'static, str> {
    if v == PROTOCOL_VERSION {
        Cow::Borrowed(PROTOCOL_VERSION)
    } else {
        Cow::Owned(v.to_owned())
    }
}

impl Default for RequestMeta {
    fn default() -> Self {
        Self::new()
    }
}

/// `notifications/progress` params (§2.2).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// The token from the request's `_meta`.
    pub token: ProgressToken,
    /// The progress so far; MUST increase with each notification for the token.
    pub progress: f64,
    /// The total, if known.
    pub total: Option<f64>,
    /// A human-readable message.
    pub message: Option<String>,
    /// Notification `_meta`, if any.
    pub meta: Option<Map<String, Value>>,
}

impl Progress {
    /// A progress notification without total or message.
    pub fn new(token: impl Into<ProgressToken>, progress: f64) -> Self {
        Progress {
            token: token.into(),
            progress,
            total: None,
            message: None,
            meta: None,
        }
    }
}

/// `notifications/cancelled` params (§3.1).
#[derive(Debug, Clone, PartialEq)]
pub struct Cancelled {
    /// The id of the request to cancel; required in 2026-07-28.
    pub request_id: RequestId,
    /// Why, for logs and people.
    pub reason: Option<String>,
    /// Notification `_meta`, if any.
    pub meta: Option<Map<String, Value>>,
}

impl Cancelled {
    /// A cancellation of `request_id` without a reason.
    pub fn new(request_id: impl Into<RequestId>) -> Self {
        Cancelled {
            request_id: request_id.into(),
            reason: None,
            meta: None,
        }
    }
}

/// A notification other than progress and cancellation.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The params object, if present.
    pub params: Option<Map<String, Value>>,
}

/// The `resultType` values this client recognises (§1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "fuzzing", derive(arbitrary::Arbitrary))]
pub enum ResultType {
    /// `complete`: the request is done.
    Complete,
    /// `input_required`: an MRTR round; it too ends the original request (§7.2).
    InputRequired,
    /// `task`: a Tasks-extension `CreateTaskResult`; it ends the request (§7.3).
    Task,
}

impl ResultType {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultType::Complete => "complete",
            ResultType::InputRequired => "input_required",
            ResultType::Task => "task",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "complete" => Some(ResultType::Complete),
            "input_required" => Some(ResultType::InputRequired),
            "task" => Some(ResultType::Task),
            _ => None,
        }
    }
}

/// A result response.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultResponse {
    /// The id of the request answered.
    pub id: RequestId,
    /// `result.resultType`; `None` when absent, which a client treats as `complete` (§1.2).
    pub result_type: Option<ResultType>,
    /// Every member of `result` except `resultType`.
    pub result: Map<String, Value>,
}

impl ResultResponse {
    /// A `complete` result with no content.
    pub fn complete(id: impl Into<RequestId>) -> Self {
        ResultResponse {
            id: id.into(),
            result_type: Some(ResultType::Complete),
            result: Map::new(),
        }
    }

    /// The result type a client acts on: an absent `resultType` counts as `complete`.
    pub fn effective_type(&self) -> ResultType {
        self.result_type.unwrap_or(ResultType::Complete)
    }

    /// `result.taskId` as a string, when present (a `CreateTaskResult` or a `tasks/get` answer).
    pub fn task_id(&self) -> Option<&str> {
        self.result.get("taskId").and_then(Value::as_str)
    }

    /// `result.status` as a string, when present (a task's state).
    pub fn task_status(&self) -> Option<&str> {
        self.result.get("status").and_then(Value::as_str)
    }
}

/// The states of a task (§7.3); the last three are terminal and never change.
pub const TASK_TERMINAL: &[&str] = &["completed", "failed", "cancelled"];

/// An error response.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorResponse {
    /// The id of the request answered; absent only when it could not be read.
    pub id: Option<RequestId>,
    /// The error object.
    pub error: ErrorObject,
}

/// The `error` member of an error response.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorObject {
    /// The integer code.
    pub code: i64,
    /// The message.
    pub message: String,
    /// Optional data of any type.
    pub data: Option<Value>,
}

impl ErrorResponse {
    /// An error response with the given id, code and message.
    pub fn new(id: Option<RequestId>, code: i64, message: impl Into<String>) -> Self {
        ErrorResponse {
            id,
            error: ErrorObject {
                code,
                message: message.into(),
                data: None,
            },
        }
    }
}

impl From<Request> for Message {
    fn from(m: Request) -> Self {
        Message::Request(m)
    }
}
impl From<Progress> for Message {
    fn from(m: Progress) -> Self {
        Message::Progress(m)
    }
}
impl From<Cancelled> for Message {
    fn from(m: Cancelled) -> Self {
        Message::Cancelled(m)
    }
}
impl From<Notification> for Message {
    fn from(m: Notification) -> Self {
        Message::Notification(m)
    }
}
impl From<ResultResponse> for Message {
    fn from(m: ResultResponse) -> Self {
        Message::Result(m)
    }
}
impl From<ErrorResponse> for Message {
    fn from(m: ErrorResponse) -> Self {
        Message::Error(m)
    }
}
