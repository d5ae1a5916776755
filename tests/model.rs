//! Unit tests of the sans-IO client and server: one spec rule per test, driven by hand.

use std::time::Duration;

use mcp_sim::model::*;
use mcp_sim::time::Time;
use mcp_sim::wire::{self, Cancelled, Message, Progress, Request, RequestId, ResultResponse};
use serde_json::json;

fn ms(n: u64) -> Time {
    Time::from_millis(n)
}

fn drain_client(c: &mut Client) -> (Vec<ClientTransmit>, Vec<ClientEvent>) {
    let mut t = Vec::new();
    while let Some(x) = c.poll_transmit() {
        t.push(x);
    }
    let mut e = Vec::new();
    while let Some(x) = c.poll_event() {
        e.push(x);
    }
    (t, e)
}

fn drain_server(s: &mut Server) -> (Vec<ServerTransmit>, Vec<BackendCall>) {
    let mut t = Vec::new();
    while let Some(x) = s.poll_transmit() {
        t.push(x);
    }
    let mut b = Vec::new();
    while let Some(x) = s.poll_backend() {
        b.push(x);
    }
    (t, b)
}

fn tool_call(policy: TimeoutPolicy) -> CallSpec {
    CallSpec::tool(SLOW_TOOL, json!({"steps": 3, "step_ms": 1000}), policy)
}

fn token_of(t: &ClientTransmit) -> wire::ProgressToken {
    match t {
        ClientTransmit::Line(Message::Request(r))
        | ClientTransmit::Post {
            msg: Message::Request(r),
            ..
        } => r.progress_token().cloned().expect("asked for progress"),
        other => panic!("not a request: {other:?}"),
    }
}

#[test]
fn stdio_timeout_sends_cancelled_and_drops_the_late_response() {
    let mut c = Client::new(ClientConfig::new(Transport::Stdio));
    let id = c.start_request(
        ms(0),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(5))),
    );
    drain_client(&mut c);
    assert_eq!(c.poll_timeout(), Some(ms(5000)));
    c.handle_timeout(ms(4999));
    assert!(c.is_outstanding(&id), "a spurious early call does nothing");
    c.handle_timeout(ms(5000));
    let (t, e) = drain_client(&mut c);
    assert!(matches!(&t[..], [ClientTransmit::Line(Message::Cancelled(x))] if x.request_id == id));
    assert_eq!(
        e,
        vec![
            ClientEvent::Timeout {
                request: id.clone(),
                reason: TimeoutReason::Idle
            },
            ClientEvent::Outcome {
                request: id.clone(),
                outcome: Outcome::TimedOut
            },
        ]
    );
    // The response that crossed the cancel is dropped quietly.
    c.handle_message(ms(5100), None, ResultResponse::complete(id).into());
    assert_eq!(drain_client(&mut c), (vec![], vec![]));
}

#[test]
fn http_timeout_closes_the_stream() {
    let mut c = Client::new(ClientConfig::new(Transport::Http));
    let id = c.start_request(
        ms(0),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(1))),
    );
    let (t, _) = drain_client(&mut c);
    let ClientTransmit::Post { stream, .. } = t[0] else {
        panic!("{t:?}")
    };
    c.handle_timeout(ms(1000));
    let (t, e) = drain_client(&mut c);
    assert_eq!(t, vec![ClientTransmit::Close { stream }]);
    assert!(e.contains(&ClientEvent::Outcome {
        request: id,
        outcome: Outcome::TimedOut
    }));
}

#[test]
fn valid_progress_resets_the_idle_clock_but_not_the_maximum() {
    let policy = TimeoutPolicy::resetting(Duration::from_secs(10), Duration::from_secs(25));
    let mut c = Client::new(ClientConfig::new(Transport::Stdio));
    let id = c.start_request(ms(0), tool_call(policy));
    let (t, _) = drain_client(&mut c);
    let token = token_of(&t[0]);
    for (at, value) in [(8_000, 1.0), (16_000, 2.0), (24_000, 3.0)] {
        c.handle_message(ms(at), None, Progress::new(token.clone(), value).into());
    }
    assert_eq!(
        c.poll_timeout(),
        Some(ms(25_000)),
        "the hard maximum caps the reset deadline"
    );
    c.handle_timeout(ms(25_000));
    let (_, e) = drain_client(&mut c);
    assert!(e.contains(&ClientEvent::Timeout {
        request: id,
        reason: TimeoutReason::Maximum
    }));
}

#[test]
fn non_increasing_and_unknown_progress_is_dropped_without_resetting() {
    let policy = TimeoutPolicy::resetting(Duration::from_secs(10), Duration::from_secs(60));
    let mut c = Client::new(ClientConfig::new(Transport::Stdio));
    let id = c.start_request(ms(0), tool_call(policy));
    let (t, _) = drain_client(&mut c);
    let token = token_of(&t[0]);
    c.handle_message(ms(1_000), None, Progress::new(token.clone(), 5.0).into());
    c.handle_message(ms(9_000), None, Progress::new(token.clone(), 5.0).into());
    c.handle_message(ms(9_500), None, Progress::new(token, 4.0).into());
    c.handle_message(ms(9_600), None, Progress::new("p-unknown", 1.0).into());
    let (_, e) = drain_client(&mut c);
    assert_eq!(
        e,
        vec![ClientEvent::Progress {
            request: id,
            progress: 5.0,
            total: None
        }]
    );
    assert_eq!(
        c.poll_timeout(),
        Some(ms(11_000)),
        "only the valid progress at 1 s reset the clock"
    );
}

#[test]
fn a_lost_http_stream_reissues_idempotent_calls_with_a_new_id_and_token() {
    let mut c = Client::new(ClientConfig::new(Transport::Http));
    let mut spec = tool_call(TimeoutPolicy::typescript_sdk());
    spec.idempotent = true;
    let first = c.start_request(ms(0), spec);
    let (t, _) = drain_client(&mut c);
    let ClientTransmit::Post { stream, .. } = t[0] else {
        panic!()
    };
    let first_token = token_of(&t[0]);
    c.handle_stream_closed(ms(500), stream);
    let (t, e) = drain_client(&mut c);
    let ClientTransmit::Post {
        msg: Message::Request(retry),
        stream: new_stream,
    } = &t[0]
    else {
        panic!("{t:?}")
    };
    assert_ne!(retry.id, first);
    assert_ne!(*new_stream, stream);
    assert_ne!(retry.progress_token(), Some(&first_token));
    assert_eq!(
        e[0],
        ClientEvent::Outcome {
            request: first.clone(),
            outcome: Outcome::Lost
        }
    );
    assert_eq!(
        e[1],
        ClientEvent::Retried {
            lost: first,
            new: retry.id.clone()
        }
    );
}

#[test]
fn cancelling_twice_is_an_api_error() {
    let mut c = Client::new(ClientConfig::new(Transport::Stdio));
    let id = c.start_request(ms(0), tool_call(TimeoutPolicy::typescript_sdk()));
    c.cancel(ms(1), &id).unwrap();
    assert_eq!(c.cancel(ms(2), &id), Err(ClientError::NotOutstanding(id)));
}

fn request_with_token(id: i64, token: Option<&str>, steps: u64) -> Message {
    let mut r = Request::tools_call(id, SLOW_TOOL, json!({"steps": steps, "step_ms": 1000}));
    r.meta.progress_token = token.map(Into::into);
    r.into()
}

fn stdio_server(progress_min_interval: Duration) -> Server {
    let mut cfg = ServerConfig::new(Transport::Stdio);
    cfg.behaviour.progress_min_interval = progress_min_interval;
    Server::new(cfg)
}

fn run_server_until(s: &mut Server, until: u64) -> (Vec<(u64, ServerTransmit)>, Vec<BackendCall>) {
    let mut out = Vec::new();
    let mut backend = Vec::new();
    while let Some(t) = s.poll_timeout().filter(|t| t.as_millis() <= until) {
        s.handle_timeout(t);
        let (tx, b) = drain_server(s);
        out.extend(tx.into_iter().map(|x| (t.as_millis(), x)));
        backend.extend(b);
    }
    (out, backend)
}

#[test]
fn server_progress_needs_a_token_increases_and_stops_at_the_result() {
    let mut s = stdio_server(Duration::ZERO);
    s.handle_message(ms(0), None, request_with_token(1, Some("p-1"), 3));
    s.handle_message(ms(0), None, request_with_token(2, None, 3));
    let (_, work) = drain_server(&mut s);
    assert_eq!(work.len(), 2);
    let (out, _) = run_server_until(&mut s, 10_000);
    let lines: Vec<&Message> = out
        .iter()
        .map(|(_, t)| match t {
            ServerTransmit::Line(m) => m,
            other => panic!("{other:?}"),
        })
        .collect();
    let progress: Vec<f64> = lines
        .iter()
        .filter_map(|m| {
            if let Message::Progress(p) = m {
                Some(p.progress)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        progress,
        vec![1.0, 2.0, 3.0],
        "only the request with a token gets progress"
    );
    let last_progress = lines
        .iter()
        .rposition(|m| matches!(m, Message::Progress(_)))
        .unwrap();
    let result_1 = lines
        .iter()
        .position(|m| matches!(m, Message::Result(r) if r.id == RequestId::Number(1)))
        .unwrap();
    assert!(last_progress < result_1);
}

#[test]
fn server_rate_limits_progress() {
    let mut s = stdio_server(Duration::from_millis(2500));
    s.handle_message(ms(0), None, request_with_token(1, Some("p-1"), 6));
    drain_server(&mut s);
    let (out, _) = run_server_until(&mut s, 10_000);
    let times: Vec<u64> = out
        .iter()
        .filter(|(_, t)| matches!(t, ServerTransmit::Line(Message::Progress(_))))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(times, vec![1000, 4000]);
}

#[test]
fn stdio_cancel_stops_work_releases_and_silences_the_request() {
    let mut s = stdio_server(Duration::ZERO);
    s.handle_message(ms(0), None, request_with_token(1, Some("p-1"), 5));
    drain_server(&mut s);
    run_server_until(&mut s, 1500);
    s.handle_message(ms(1500), None, Cancelled::new(1).into());
    let (tx, backend) = drain_server(&mut s);
    assert!(tx.is_empty());
    assert_eq!(
        backend,
        vec![BackendCall::Release {
            request: RequestId::Number(1)
        }]
    );
    assert_eq!(s.poll_timeout(), None, "no more work is scheduled");
    // Unknown and repeated cancels change nothing.
    s.handle_message(ms(1600), None, Cancelled::new(1).into());
    s.handle_message(ms(1600), None, Cancelled::new("nope").into());
    assert_eq!(drain_server(&mut s), (vec![], vec![]));
}

#[test]
fn http_disconnect_is_cancellation() {
    let mut s = Server::new(ServerConfig::new(Transport::Http));
    s.handle_message(
        ms(0),
        Some(StreamId(7)),
        request_with_token(1, Some("p-1"), 5),
    );
    let (tx, _) = drain_server(&mut s);
    assert_eq!(
        tx,
        vec![ServerTransmit::SseStart {
            stream: StreamId(7)
        }]
    );
    s.handle_stream_closed(ms(100), StreamId(7));
    let (tx, backend) = drain_server(&mut s);
    assert!(tx.is_empty());
    assert_eq!(
        backend,
        vec![BackendCall::Release {
            request: RequestId::Number(1)
        }]
    );
}

#[test]
fn json_response_mode_carries_no_progress() {
    let mut cfg = ServerConfig::new(Transport::Http);
    cfg.behaviour.response_mode = ResponseMode::Json;
    cfg.behaviour.progress_min_interval = Duration::ZERO;
    let mut s = Server::new(cfg);
    s.handle_message(
        ms(0),
        Some(StreamId(1)),
        request_with_token(1, Some("p-1"), 3),
    );
    drain_server(&mut s);
    let (out, _) = run_server_until(&mut s, 10_000);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(matches!(
        &out[0].1,
        ServerTransmit::Json {
            status: 200,
            msg: Message::Result(_),
            ..
        }
    ));
}

#[test]
fn invalid_requests_get_errors_and_broken_notifications_get_nothing() {
    let mut s = stdio_server(Duration::ZERO);
    let missing_meta =
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{}}}"#;
    let err = wire::decode(missing_meta).unwrap_err();
    s.handle_invalid(ms(0), None, &err);
    let (tx, _) = drain_server(&mut s);
    match &tx[..] {
        [ServerTransmit::Line(Message::Error(e))] => {
            assert_eq!(e.id, Some(RequestId::Number(3)));
            assert_eq!(e.error.code, wire::codes::INVALID_PARAMS);
        }
        other => panic!("{other:?}"),
    }
    let bad_cancel =
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":null}}"#;
    s.handle_invalid(ms(0), None, &wire::decode(bad_cancel).unwrap_err());
    assert_eq!(drain_server(&mut s), (vec![], vec![]));
}

#[test]
fn listen_acknowledges_first_tags_notifications_and_ends_gracefully() {
    let mut s = stdio_server(Duration::ZERO);
    let mut listen = Request::new("listen-1", wire::METHOD_LISTEN);
    listen
        .params
        .insert("notifications".into(), json!({"toolsListChanged": true}));
    s.handle_message(ms(0), None, listen.into());
    s.notify_tools_changed(ms(10));
    s.shutdown(ms(20));
    let (tx, _) = drain_server(&mut s);
    let sub = |m: &Message| -> Option<serde_json::Value> {
        let v = wire::to_value(m).unwrap();
        v.pointer("/params/_meta/io.modelcontextprotocol~1subscriptionId")
            .or_else(|| v.pointer("/result/_meta/io.modelcontextprotocol~1subscriptionId"))
            .cloned()
    };
    let msgs: Vec<&Message> = tx
        .iter()
        .map(|t| {
            if let ServerTransmit::Line(m) = t {
                m
            } else {
                panic!()
            }
        })
        .collect();
    assert_eq!(msgs.len(), 3);
    assert!(
        matches!(msgs[0], Message::Notification(n) if n.method == wire::METHOD_SUBSCRIPTIONS_ACKNOWLEDGED)
    );
    assert!(
        matches!(msgs[1], Message::Notification(n) if n.method == "notifications/tools/list_changed")
    );
    assert!(matches!(msgs[2], Message::Result(r) if r.id == RequestId::from("listen-1")));
    for m in msgs {
        assert_eq!(sub(m), Some(json!("listen-1")));
    }
}

/// The lines a stdio server wrote, as messages.
fn lines(tx: Vec<ServerTransmit>) -> Vec<Message> {
    tx.into_iter()
        .map(|t| match t {
            ServerTransmit::Line(m) => m,
            other => panic!("not a line: {other:?}"),
        })
        .collect()
}

fn task_call(id: i64, steps: u64, declare: bool) -> Request {
    let mut r = Request::tools_call(id, SLOW_TOOL, json!({"steps": steps, "step_ms": 1000}));
    r.meta.progress_token = Some("p-1".into());
    if declare {
        r.declare_tasks();
    }
    r
}

fn about_task(id: i64, method: &'static str, task: &str) -> Message {
    let mut r = Request::new(id, method);
    r.params.insert("taskId".into(), json!(task));
    r.into()
}

fn result(m: &Message) -> &ResultResponse {
    match m {
        Message::Result(r) => r,
        other => panic!("not a result: {other:?}"),
    }
}

fn error_code(m: &Message) -> i64 {
    match m {
        Message::Error(e) => e.error.code,
        other => panic!("not an error: {other:?}"),
    }
}

/// A declared call is answered at once with a CreateTaskResult and no progress follows; the
/// work runs on, a lost pipe does not stop it, and tasks/get then inlines the result.
#[test]
fn a_task_answers_at_once_outlives_the_connection_and_inlines_its_result() {
    let mut s = stdio_server(Duration::ZERO);
    s.handle_message(ms(0), None, task_call(1, 3, true).into());
    let (tx, backend) = drain_server(&mut s);
    let msgs = lines(tx);
    assert_eq!(msgs.len(), 1);
    let created = result(&msgs[0]);
    assert_eq!(created.result_type, Some(wire::ResultType::Task));
    assert_eq!(created.task_status(), Some("working"));
    let task = created.task_id().expect("a task id").to_owned();
    assert_eq!(backend.len(), 1, "the work started");
    s.handle_disconnect(ms(500));
    let (out, backend) = run_server_until(&mut s, 3000);
    assert!(out.is_empty(), "no progress for the call's token: {out:?}");
    assert_eq!(
        backend.last(),
        Some(&BackendCall::Release {
            request: RequestId::Number(1)
        })
    );
    s.handle_message(ms(3100), None, about_task(2, wire::METHOD_TASKS_GET, &task));
    let msgs = lines(drain_server(&mut s).0);
    let got = result(&msgs[0]);
    assert_eq!(got.effective_type(), wire::ResultType::Complete);
    assert_eq!(got.task_status(), Some("completed"));
    assert!(got.result["result"]["content"].is_array());
}

/// Negotiation is per request: an undeclared call is an ordinary call, even after a declared
/// one; a tool that needs a task refuses an undeclared call with -32021.
#[test]
fn tasks_are_negotiated_per_request() {
    let mut s = stdio_server(Duration::ZERO);
    s.handle_message(ms(0), None, task_call(1, 0, true).into());
    s.handle_message(ms(0), None, task_call(2, 0, false).into());
    let msgs = lines(drain_server(&mut s).0);
    assert_eq!(result(&msgs[0]).result_type, Some(wire::ResultType::Task));
    assert_eq!(
        result(&msgs[1]).result_type,
        Some(wire::ResultType::Complete)
    );
    let mut r = Request::tools_call(3, SLOW_TOOL, json!({"steps": 1, "task": "required"}));
    r.meta.progress_token = None;
    s.handle_message(ms(0), None, r.into());
    let msgs = lines(drain_server(&mut s).0);
    assert_eq!(
        error_code(&msgs[0]),
        wire::codes::MISSING_REQUIRED_CLIENT_CAPABILITY
    );
}

/// tasks/cancel is an empty complete ack and the task ends cancelled for good; a second
/// cancel, an unknown task and an expired one get -32602; notifications/cancelled does not
/// touch a task.
#[test]
fn tasks_cancel_by_request_and_expire() {
    let mut cfg = ServerConfig::new(Transport::Stdio);
    cfg.behaviour.task_ttl = Duration::from_secs(60);
    let mut s = Server::new(cfg);
    s.handle_message(ms(0), None, task_call(1, 100, true).into());
    let task = result(&lines(drain_server(&mut s).0)[0])
        .task_id()
        .unwrap()
        .to_owned();
    s.handle_message(ms(10), None, Cancelled::new(1).into());
    assert_eq!(
        drain_server(&mut s).0,
        vec![],
        "a cancel of the call is ignored"
    );
    assert_eq!(s.active_jobs(), 1);
    s.handle_message(
        ms(20),
        None,
        about_task(2, wire::METHOD_TASKS_CANCEL, &task),
    );
    let (tx, backend) = drain_server(&mut s);
    let ack = result(&lines(tx)[0]).clone();
    assert_eq!(ack.result_type, Some(wire::ResultType::Complete));
    assert!(ack.result.is_empty(), "an empty ack: {ack:?}");
    assert_eq!(
        backend,
        vec![BackendCall::Release {
            request: RequestId::Number(1)
        }]
    );
    s.handle_message(ms(30), None, about_task(3, wire::METHOD_TASKS_GET, &task));
    s.handle_message(
        ms(30),
        None,
        about_task(4, wire::METHOD_TASKS_CANCEL, &task),
    );
    s.handle_message(ms(30), None, about_task(5, wire::METHOD_TASKS_GET, "nope"));
    let msgs = lines(drain_server(&mut s).0);
    assert_eq!(result(&msgs[0]).task_status(), Some("cancelled"));
    assert_eq!(error_code(&msgs[1]), wire::codes::INVALID_PARAMS);
    assert_eq!(error_code(&msgs[2]), wire::codes::INVALID_PARAMS);
    run_server_until(&mut s, 61_000);
    s.handle_message(
        ms(61_000),
        None,
        about_task(6, wire::METHOD_TASKS_GET, &task),
    );
    assert_eq!(
        error_code(&lines(drain_server(&mut s).0)[0]),
        wire::codes::INVALID_PARAMS
    );
}

/// input_required ends the call; a retry that echoes the state moves on, one that alters it
/// is refused, and the last round runs the tool.
#[test]
fn input_rounds_end_the_call_and_the_state_is_checked() {
    let mut s = stdio_server(Duration::ZERO);
    let args = json!({"steps": 0, "input_rounds": 2});
    let call = |id: i64, state: Option<&serde_json::Value>| {
        let mut r = Request::tools_call(id, SLOW_TOOL, args.clone());
        if let Some(st) = state {
            r.params.insert("requestState".into(), st.clone());
            r.params.insert(
                "inputResponses".into(),
                json!({"confirm": {"action": "accept"}}),
            );
        }
        Message::from(r)
    };
    s.handle_message(ms(0), None, call(1, None));
    let first = result(&lines(drain_server(&mut s).0)[0]).clone();
    assert_eq!(first.result_type, Some(wire::ResultType::InputRequired));
    assert!(first.result.contains_key("inputRequests"));
    let state = first.result["requestState"].clone();
    s.handle_message(
        ms(10),
        None,
        call(2, Some(&json!(format!("{}x", state.as_str().unwrap())))),
    );
    assert_eq!(
        error_code(&lines(drain_server(&mut s).0)[0]),
        wire::codes::INVALID_PARAMS
    );
    s.handle_message(ms(20), None, call(3, Some(&state)));
    let second = result(&lines(drain_server(&mut s).0)[0]).clone();
    assert_eq!(second.result_type, Some(wire::ResultType::InputRequired));
    s.handle_message(ms(30), None, call(4, Some(&second.result["requestState"])));
    let done = result(&lines(drain_server(&mut s).0)[0]).clone();
    assert_eq!(done.result_type, Some(wire::ResultType::Complete));
}

/// The client retries an input_required call at once: new id, new token, the state echoed,
/// every input request answered; the original request's outcome is input_required.
#[test]
fn the_client_retries_input_required_with_a_new_id_token_and_the_same_state() {
    let mut c = Client::new(ClientConfig::new(Transport::Stdio));
    let id = c.start_request(
        ms(0),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(60))),
    );
    let (tx, _) = drain_client(&mut c);
    let first_token = token_of(&tx[0]);
    let mut ir = ResultResponse::complete(id.clone());
    ir.result_type = Some(wire::ResultType::InputRequired);
    ir.result
        .insert("inputRequests".into(), json!({"a": {}, "b": {}}));
    ir.result.insert("requestState".into(), json!("opaque"));
    c.handle_message(ms(10), None, ir.into());
    let (tx, events) = drain_client(&mut c);
    let ClientTransmit::Line(Message::Request(retry)) = &tx[0] else {
        panic!("{tx:?}")
    };
    assert_ne!(retry.id, id);
    assert_ne!(token_of(&tx[0]), first_token);
    assert_eq!(retry.params["requestState"], json!("opaque"));
    assert_eq!(retry.params["inputResponses"].as_object().unwrap().len(), 2);
    assert_eq!(
        events,
        vec![
            ClientEvent::Outcome {
                request: id.clone(),
                outcome: Outcome::InputRequired
            },
            ClientEvent::Retried {
                lost: id,
                new: retry.id.clone()
            },
        ]
    );
}

/// A task call: the client polls tasks/get no faster than pollIntervalMs, a lost poll is
/// followed by the next, the call's outcome is the task's end, and a cancel is tasks/cancel.
#[test]
fn the_client_polls_a_task_at_its_interval_and_cancels_it_by_request() {
    let mut c = Client::new(ClientConfig::new(Transport::Http));
    let mut spec = tool_call(TimeoutPolicy::fixed(Duration::from_secs(600)));
    spec.task = true;
    let id = c.start_request(ms(0), spec);
    let (tx, _) = drain_client(&mut c);
    let ClientTransmit::Post {
        msg: Message::Request(r),
        ..
    } = &tx[0]
    else {
        panic!("{tx:?}")
    };
    assert!(r.declares_tasks());
    let mut created = ResultResponse::complete(id.clone());
    created.result_type = Some(wire::ResultType::Task);
    created.result.insert("taskId".into(), json!("t-1"));
    created.result.insert("status".into(), json!("working"));
    created.result.insert("pollIntervalMs".into(), json!(5000));
    c.handle_message(ms(100), Some(StreamId(1)), created.into());
    let (_, events) = drain_client(&mut c);
    assert!(events.is_empty(), "the call waits for its task: {events:?}");
    assert!(c.is_outstanding(&id));
    assert_eq!(c.poll_timeout(), Some(ms(5100)));
    c.handle_timeout(ms(5100));
    let (tx, _) = drain_client(&mut c);
    let ClientTransmit::Post {
        stream,
        msg: Message::Request(poll),
    } = &tx[0]
    else {
        panic!("{tx:?}")
    };
    assert_eq!(poll.method, wire::METHOD_TASKS_GET);
    c.handle_stream_closed(ms(5200), *stream);
    drain_client(&mut c);
    assert_eq!(
        c.poll_timeout(),
        Some(ms(10_100)),
        "the next poll keeps the interval"
    );
    c.cancel(ms(6000), &id).unwrap();
    let (tx, events) = drain_client(&mut c);
    let ClientTransmit::Post {
        msg: Message::Request(cancel),
        ..
    } = &tx[0]
    else {
        panic!("{tx:?}")
    };
    assert_eq!(cancel.method, wire::METHOD_TASKS_CANCEL);
    assert_eq!(cancel.params["taskId"], json!("t-1"));
    assert_eq!(
        events,
        vec![ClientEvent::Outcome {
            request: id,
            outcome: Outcome::Cancelled
        }]
    );
}

/// The legacy era (docs/spec/mcp-2025-11-25.md §2): the client opens with `initialize` and
/// holds its requests until the result, then sends `notifications/initialized` and the
/// requests, in the legacy shape; the dual-era server answers `initialize` at the version asked
/// for and `ping` with an empty result, and its results carry no `resultType`.
#[test]
fn a_legacy_client_and_the_dual_era_server_shake_hands_before_anything_else() {
    let legacy = ClientConfig {
        connect: mcp_sim::Connect::Pinned(wire::Era::LEGACY),
        ..ClientConfig::new(Transport::Stdio)
    };
    let mut c = Client::new(legacy);
    let call = c.start_request(
        ms(0),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(60))),
    );
    let (t, _) = drain_client(&mut c);
    let [ClientTransmit::Line(Message::Request(init))] = &t[..] else {
        panic!("only initialize goes out first: {t:?}");
    };
    assert_eq!(init.method, "initialize");
    assert!(init.meta.legacy);
    let text = wire::encode(&Message::Request(init.clone())).unwrap();
    assert!(!text.contains("io.modelcontextprotocol"), "{text}");

    let mut s = Server::new(ServerConfig::new(Transport::Stdio));
    s.handle_message(ms(1), None, Message::Request(init.clone()));
    let (answer, _) = drain_server(&mut s);
    let [ServerTransmit::Line(Message::Result(r))] = &answer[..] else {
        panic!("{answer:?}");
    };
    assert_eq!(r.result_type, None, "a legacy result has no resultType");
    assert_eq!(r.result["protocolVersion"], "2025-11-25");
    assert_eq!(s.era(), Some(wire::Era::LEGACY));

    c.handle_message(ms(2), None, Message::Result(r.clone()));
    let (t, e) = drain_client(&mut c);
    assert!(
        matches!(&t[0], ClientTransmit::Line(Message::Notification(n)) if n.method == "notifications/initialized")
    );
    let ClientTransmit::Line(Message::Request(tool)) = &t[1] else {
        panic!("then the held call: {t:?}");
    };
    assert_eq!(tool.id, call);
    assert!(tool.meta.legacy);
    assert!(e.contains(&ClientEvent::Outcome {
        request: init.id.clone(),
        outcome: Outcome::Result
    }));

    let ping = wire::decode_with(
        br#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#,
        &wire::DecodeOptions {
            era: wire::Era::LEGACY,
            ..Default::default()
        },
    )
    .unwrap();
    s.handle_message(ms(3), None, ping);
    let (answer, _) = drain_server(&mut s);
    assert!(
        matches!(&answer[..], [ServerTransmit::Line(Message::Result(r))]
        if r.result.is_empty() && r.result_type.is_none())
    );
}

/// A legacy client never cancels `initialize` (LA3): when the handshake times out it drops the
/// connection and starts another, its calls still waiting; a call that gives up while it
/// waits sends nothing (it never went out).
#[test]
fn a_legacy_handshake_that_times_out_is_not_cancelled() {
    let mut c = Client::new(ClientConfig {
        connect: mcp_sim::Connect::Pinned(wire::Era::LEGACY),
        ..ClientConfig::new(Transport::Stdio)
    });
    let call = c.start_request(
        ms(0),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(100))),
    );
    drain_client(&mut c);
    let deadline = ms(0) + client::HANDSHAKE_TIMEOUT;
    assert_eq!(c.poll_timeout(), Some(deadline));
    c.handle_timeout(deadline);
    let (t, _) = drain_client(&mut c);
    assert!(matches!(t[0], ClientTransmit::Disconnect), "{t:?}");
    assert!(matches!(&t[1], ClientTransmit::Line(Message::Request(r)) if r.method == "initialize"));
    assert!(t
        .iter()
        .all(|x| !matches!(x, ClientTransmit::Line(Message::Cancelled(_)))));
    c.cancel(ms(40_000), &call).unwrap();
    let (t, e) = drain_client(&mut c);
    assert!(t.is_empty(), "nothing to cancel on the wire: {t:?}");
    assert!(e.contains(&ClientEvent::Outcome {
        request: call,
        outcome: Outcome::Cancelled
    }));
}

/// Over legacy HTTP a host that is done ends its session with a `DELETE` (docs/spec/
/// mcp-2025-11-25.md §5), and only once every POST has its answer: sent earlier it would end
/// the session under a request or a cancel the server has not read. The server forgets the
/// session, so a later request in it is refused, and the client's next call opens a new one.
#[test]
fn a_legacy_http_client_deletes_its_session_once_every_post_is_answered() {
    let mut c = Client::new(ClientConfig {
        connect: mcp_sim::Connect::Pinned(wire::Era::LEGACY),
        ..ClientConfig::new(Transport::Http)
    });
    let mut s = Server::new(ServerConfig::new(Transport::Http));
    let call = c.start_request(
        ms(0),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(60))),
    );
    let (t, _) = drain_client(&mut c);
    let [ClientTransmit::Post {
        stream: init_stream,
        msg: init,
    }] = &t[..]
    else {
        panic!("initialize first: {t:?}");
    };
    s.handle_message(ms(1), Some(*init_stream), init.clone());
    let (answer, _) = drain_server(&mut s);
    let [ServerTransmit::Json {
        msg,
        session: Some(session),
        status: 200,
        ..
    }] = &answer[..]
    else {
        panic!("{answer:?}");
    };
    c.handle_status(ms(2), *init_stream, 200);
    c.handle_session(session);
    c.handle_message(ms(2), Some(*init_stream), msg.clone());
    c.end_session();
    let (t, _) = drain_client(&mut c);
    assert!(
        t.iter()
            .all(|x| !matches!(x, ClientTransmit::Delete { .. })),
        "not while the call is out: {t:?}"
    );
    let mut unanswered: Vec<StreamId> = t
        .iter()
        .filter_map(|x| match x {
            ClientTransmit::Post { stream, .. } | ClientTransmit::Get { stream, .. } => {
                Some(*stream)
            }
            _ => None,
        })
        .collect();
    let call_stream = t
        .iter()
        .find_map(|x| match x {
            ClientTransmit::Post { stream, msg } if msg.id() == Some(&call) => Some(*stream),
            _ => None,
        })
        .expect("the held call went out");
    c.handle_status(ms(3), call_stream, 200);
    let done = ResultResponse {
        result_type: None,
        ..ResultResponse::complete(call.clone())
    };
    c.handle_message(ms(3), Some(call_stream), Message::Result(done));
    unanswered.retain(|st| *st != call_stream);
    assert!(
        !unanswered.is_empty(),
        "the initialized POST and the GET wait for answers"
    );
    let last = unanswered.pop().unwrap();
    for st in unanswered {
        c.handle_status(ms(4), st, 202);
    }
    let (t, _) = drain_client(&mut c);
    assert!(t.is_empty(), "one POST still unanswered: {t:?}");
    c.handle_status(ms(5), last, 405);
    let (t, _) = drain_client(&mut c);
    let [ClientTransmit::Delete { stream }] = &t[..] else {
        panic!("then the DELETE: {t:?}");
    };
    let headers = c.delete_headers();
    assert_eq!(headers.get("mcp-session-id"), Some(session));
    assert_eq!(
        headers.get("mcp-protocol-version").map(String::as_str),
        Some("2025-11-25")
    );

    let in_session = RequestHead {
        session: Some(session),
        ..RequestHead::default()
    };
    let admitted = s.admit(*stream, false, in_session);
    assert_eq!(admitted.refusal, None, "the DELETE names the live session");
    s.handle_delete(ms(6), *stream);
    let (answer, _) = drain_server(&mut s);
    assert_eq!(answer, vec![ServerTransmit::Accepted { stream: *stream }]);
    let later = s.admit(StreamId(999), true, in_session);
    assert_eq!(
        later.refusal.map(|r| r.status),
        Some(404),
        "the session is forgotten: a request in it gets 404"
    );

    c.handle_status(ms(7), *stream, 202);
    c.start_request(
        ms(8),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(60))),
    );
    let (t, _) = drain_client(&mut c);
    assert!(
        matches!(&t[..], [ClientTransmit::Post { msg: Message::Request(r), .. }] if r.method == "initialize"),
        "a call after the DELETE opens a new session: {t:?}"
    );
    assert_eq!(c.delete_headers().get("mcp-session-id"), None);
}

fn auto_client(transport: Transport) -> Client {
    Client::new(ClientConfig {
        connect: mcp_sim::Connect::AUTO,
        ..ClientConfig::new(transport)
    })
}

/// Auto mode (docs/spec/mcp-2025-11-25.md §1): the first request waits behind a
/// `server/discover`; the dual-era server answers it, and the call goes out in the modern
/// shape, with no handshake.
#[test]
fn an_auto_client_stays_modern_when_the_server_answers_discover() {
    let mut c = auto_client(Transport::Stdio);
    let call = c.start_request(
        ms(0),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(60))),
    );
    let (t, _) = drain_client(&mut c);
    let [ClientTransmit::Line(probe)] = &t[..] else {
        panic!("the probe alone: {t:?}");
    };
    assert!(
        matches!(probe, Message::Request(r) if r.method == "server/discover" && !r.meta.legacy)
    );
    let mut s = Server::new(ServerConfig::new(Transport::Stdio));
    s.handle_message(ms(1), None, probe.clone());
    let (answer, _) = drain_server(&mut s);
    let [ServerTransmit::Line(answer)] = &answer[..] else {
        panic!("{answer:?}");
    };
    assert!(matches!(answer, Message::Result(_)), "{answer:?}");
    c.handle_message(ms(2), None, answer.clone());
    let (t, _) = drain_client(&mut c);
    assert!(
        matches!(&t[..], [ClientTransmit::Line(Message::Request(r))] if r.id == call && !r.meta.legacy),
        "then the call, modern: {t:?}"
    );
    assert_eq!(c.era(), wire::Era::Modern);
}

/// Auto mode against a legacy-only server: the refusal (-32601 on stdio) makes the client
/// fall back to `initialize`, its waiting call reshaped for the legacy era.
#[test]
fn an_auto_client_falls_back_to_initialize_when_discover_is_refused() {
    let mut c = auto_client(Transport::Stdio);
    let call = c.start_request(
        ms(0),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(60))),
    );
    let (t, _) = drain_client(&mut c);
    let mut s = Server::new(ServerConfig {
        eras: ServerEras::LegacyOnly {
            ignores_discover: false,
        },
        ..ServerConfig::new(Transport::Stdio)
    });
    let ClientTransmit::Line(probe) = &t[0] else {
        panic!("{t:?}");
    };
    s.handle_message(ms(1), None, probe.clone());
    let (answer, _) = drain_server(&mut s);
    let [ServerTransmit::Line(Message::Error(e))] = &answer[..] else {
        panic!("refused: {answer:?}");
    };
    assert_eq!(e.error.code, wire::codes::METHOD_NOT_FOUND);
    assert_eq!(s.era(), None, "the probe decides nothing on the server");
    c.handle_message(ms(2), None, Message::Error(e.clone()));
    let (t, _) = drain_client(&mut c);
    let [ClientTransmit::Line(Message::Request(init))] = &t[..] else {
        panic!("initialize alone: {t:?}");
    };
    assert_eq!(init.method, "initialize");
    assert_eq!(c.era(), wire::Era::LEGACY);
    s.handle_message(ms(3), None, Message::Request(init.clone()));
    let (answer, _) = drain_server(&mut s);
    let [ServerTransmit::Line(result)] = &answer[..] else {
        panic!("{answer:?}");
    };
    c.handle_message(ms(4), None, result.clone());
    let (t, _) = drain_client(&mut c);
    assert!(
        t.iter().any(|x| matches!(x, ClientTransmit::Line(Message::Request(r)) if r.id == call && r.meta.legacy)),
        "the call goes out in the legacy shape: {t:?}"
    );
}

/// Auto mode against a server whose `server/discover` result lists only the legacy revisions
/// (go-sdk's stateful HTTP handler, which then refuses 2026-07-28 requests): the client falls
/// back to `initialize` as on a refusal, instead of sending its call in an era the server did
/// not offer.
#[test]
fn an_auto_client_falls_back_when_discover_offers_no_modern_version() {
    let mut c = auto_client(Transport::Stdio);
    let call = c.start_request(
        ms(0),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(60))),
    );
    let (t, _) = drain_client(&mut c);
    let ClientTransmit::Line(Message::Request(probe)) = &t[0] else {
        panic!("{t:?}");
    };
    assert_eq!(probe.method, "server/discover");
    let mut answer = wire::ResultResponse::complete(probe.id.clone());
    answer.result.insert(
        "supportedVersions".into(),
        serde_json::json!(["2025-11-25", "2025-06-18"]),
    );
    answer
        .result
        .insert("capabilities".into(), serde_json::json!({"tools": {}}));
    c.handle_message(ms(2), None, Message::Result(answer));
    let (t, _) = drain_client(&mut c);
    let [ClientTransmit::Line(Message::Request(init))] = &t[..] else {
        panic!("initialize alone, not the call: {t:?}");
    };
    assert_eq!(init.method, "initialize");
    assert_eq!(c.era(), wire::Era::LEGACY);
    assert!(
        c.is_outstanding(&call),
        "the call waits behind the handshake"
    );
}

/// Auto mode against a server that ignores `server/discover` (fastmcp 3.x): after
/// [`client::DISCOVER_TIMEOUT`] the probe times out, is cancelled as a modern request is (the
/// notification on stdio, the stream's close on HTTP), and the client falls back.
#[test]
fn an_auto_client_cancels_an_unanswered_discover_and_falls_back() {
    for transport in [Transport::Stdio, Transport::Http] {
        let mut c = auto_client(transport);
        c.start_request(
            ms(0),
            tool_call(TimeoutPolicy::fixed(Duration::from_secs(60))),
        );
        drain_client(&mut c);
        let deadline = ms(0) + client::DISCOVER_TIMEOUT;
        assert_eq!(c.poll_timeout(), Some(deadline));
        c.handle_timeout(deadline);
        let (t, e) = drain_client(&mut c);
        match transport {
            Transport::Stdio => assert!(
                matches!(&t[0], ClientTransmit::Line(Message::Cancelled(_))),
                "{t:?}"
            ),
            Transport::Http => assert!(matches!(&t[0], ClientTransmit::Close { .. }), "{t:?}"),
        }
        assert!(
            matches!(&t[1], ClientTransmit::Line(Message::Request(r)) | ClientTransmit::Post { msg: Message::Request(r), .. } if r.method == "initialize"),
            "{t:?}"
        );
        assert!(e.iter().any(|x| matches!(
            x,
            ClientEvent::Outcome {
                outcome: Outcome::TimedOut,
                ..
            }
        )));
    }
}

/// Auto mode over HTTP: the TypeScript SDK v1 refuses a request outside a session with 400
/// and a null id; the status alone is the refusal.
#[test]
fn an_auto_client_reads_an_http_error_status_as_the_refusal() {
    let mut c = auto_client(Transport::Http);
    c.start_request(
        ms(0),
        tool_call(TimeoutPolicy::fixed(Duration::from_secs(60))),
    );
    let (t, _) = drain_client(&mut c);
    let [ClientTransmit::Post { stream, msg }] = &t[..] else {
        panic!("{t:?}");
    };
    let mut s = Server::new(ServerConfig {
        eras: ServerEras::LegacyOnly {
            ignores_discover: false,
        },
        ..ServerConfig::new(Transport::Http)
    });
    s.handle_message(ms(1), Some(*stream), msg.clone());
    let (answer, _) = drain_server(&mut s);
    let [ServerTransmit::Json {
        status: 400,
        msg: Message::Error(e),
        ..
    }] = &answer[..]
    else {
        panic!("{answer:?}");
    };
    assert_eq!(e.id, None);
    c.handle_status(ms(2), *stream, 400);
    c.handle_message(ms(2), Some(*stream), Message::Error(e.clone()));
    let (t, _) = drain_client(&mut c);
    assert!(
        matches!(&t[..], [ClientTransmit::Post { msg: Message::Request(r), .. }] if r.method == "initialize"),
        "{t:?}"
    );
}

/// The legacy era's other direction (docs/spec/mcp-2025-11-25.md LB7, LC9): a tool call that
/// samples makes the server ask the client with `sampling/createMessage`; the client answers
/// after the host's model took its time, and a cancel from the server drops the answer. The
/// server cancels its own request when the call ends without it.
#[test]
fn the_legacy_server_asks_the_client_to_sample_and_cancels_when_the_call_ends_first() {
    let legacy = ClientConfig {
        connect: mcp_sim::Connect::Pinned(wire::Era::LEGACY),
        ..ClientConfig::new(Transport::Stdio)
    };
    for slow_model in [false, true] {
        let mut c = Client::new(legacy.clone());
        let mut s = Server::new(ServerConfig::new(Transport::Stdio));
        let steps = if slow_model { 1 } else { 10 };
        let spec = CallSpec::tool(
            SLOW_TOOL,
            json!({"steps": steps, "step_ms": 1000, "sample": true}),
            TimeoutPolicy::fixed(Duration::from_secs(60)),
        );
        c.start_request(ms(0), spec);
        let mut now = 0;
        let mut asked = None;
        let mut answered = false;
        let mut server_cancelled = false;
        // Carry every line both ways, one ms per hop, until both are quiet.
        for _ in 0..200 {
            let (to_server, _) = drain_client(&mut c);
            for t in to_server {
                if let ClientTransmit::Line(m) = t {
                    answered |= matches!(&m, Message::Result(r) if Some(&r.id) == asked.as_ref());
                    s.handle_message(ms(now), None, m);
                }
            }
            let (to_client, _) = drain_server(&mut s);
            for t in to_client {
                if let ServerTransmit::Line(m) = t {
                    if let Message::Request(r) = &m {
                        assert_eq!(r.method, "sampling/createMessage");
                        asked = Some(r.id.clone());
                    }
                    server_cancelled |= matches!(&m, Message::Cancelled(x) if Some(&x.request_id) == asked.as_ref());
                    c.handle_message(ms(now), None, m);
                }
            }
            let next = [c.poll_timeout(), s.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next else { break };
            now = next.as_millis().max(now + 1);
            c.handle_timeout(ms(now));
            s.handle_timeout(ms(now));
        }
        assert!(asked.is_some(), "the server asked");
        if slow_model {
            // The 1 s call ends before the model's answer: the server cancels its request,
            // and the client never answers it.
            assert!(server_cancelled && !answered);
        } else {
            assert!(answered && !server_cancelled);
        }
        assert_eq!(c.poll_timeout(), None, "nothing left to answer");
    }
}

/// The dual-era server over HTTP answers each request in the era it speaks, for any number
/// of clients in any order: two legacy sessions and 2026-07-28 requests interleaved, the same
/// request id in each, a legacy cancel that stops its own session's call only.
#[test]
fn one_http_server_serves_both_eras_side_by_side() {
    let mut s = Server::new(ServerConfig::new(Transport::Http));
    fn head<'a>(
        session: Option<&'a str>,
        version: Option<&'a str>,
        method: &'a str,
    ) -> RequestHead<'a> {
        RequestHead {
            session,
            version,
            method: Some(method),
        }
    }
    let legacy = |mut r: Request| {
        r.meta.legacy = true;
        r
    };
    let initialize = |id: i64| {
        let mut r = legacy(Request::new(id, "initialize"));
        r.params
            .insert("protocolVersion".into(), json!("2025-11-25"));
        r.params.insert("capabilities".into(), json!({}));
        Message::from(r)
    };
    let session_of = |t: &[ServerTransmit]| match t {
        [ServerTransmit::Json {
            session: Some(id), ..
        }] => id.clone(),
        other => panic!("an initialize answered with a session: {other:?}"),
    };
    // The first legacy client shakes hands.
    let a = s.admit(StreamId(1), true, head(None, None, "initialize"));
    assert_eq!((a.era.is_legacy(), a.refusal), (true, None));
    s.handle_message(ms(0), Some(StreamId(1)), initialize(0));
    let first = session_of(&drain_server(&mut s).0);
    // A 2026-07-28 request after it is stateless and modern.
    let modern = s.admit(
        StreamId(2),
        true,
        head(None, Some("2026-07-28"), "tools/call"),
    );
    assert_eq!((modern.era, modern.refusal), (wire::Era::Modern, None));
    s.handle_message(
        ms(1),
        Some(StreamId(2)),
        request_with_token(1, Some("m"), 3),
    );
    // The legacy client's call with the same id, in its session.
    let a = s.admit(
        StreamId(3),
        true,
        head(Some(&first), Some("2025-11-25"), "tools/call"),
    );
    assert_eq!((a.era.is_legacy(), a.refusal), (true, None));
    let call = legacy(Request::tools_call(
        1,
        SLOW_TOOL,
        json!({"steps": 3, "step_ms": 1000}),
    ));
    s.handle_message(ms(2), Some(StreamId(3)), call.clone().into());
    // A second legacy client, its own session, the same id again.
    s.admit(StreamId(4), true, head(None, None, "initialize"));
    s.handle_message(ms(3), Some(StreamId(4)), initialize(0));
    let (t, _) = drain_server(&mut s);
    let second = match t.last() {
        Some(ServerTransmit::Json {
            session: Some(id), ..
        }) => id.clone(),
        other => panic!("the second initialize answered with a session: {other:?}"),
    };
    assert_ne!(first, second, "each legacy client has a session of its own");
    s.admit(
        StreamId(5),
        true,
        head(Some(&second), Some("2025-11-25"), "tools/call"),
    );
    s.handle_message(ms(4), Some(StreamId(5)), call.into());
    // A legacy request without its session is refused; an unknown session is 404.
    let orphan = s.admit(
        StreamId(6),
        true,
        head(None, Some("2025-11-25"), "tools/list"),
    );
    assert_eq!(orphan.refusal.map(|r| r.status), Some(400));
    let unknown = s.admit(StreamId(7), true, head(Some("nope"), None, "tools/list"));
    assert_eq!(unknown.refusal.map(|r| r.status), Some(404));
    // The first session cancels its call 1: the others go on.
    s.admit(
        StreamId(8),
        true,
        head(Some(&first), Some("2025-11-25"), "notifications/cancelled"),
    );
    s.handle_message(ms(500), Some(StreamId(8)), Cancelled::new(1).into());
    let (t, _) = run_server_until(&mut s, 10_000);
    let results: Vec<(StreamId, Option<&str>, bool)> = t
        .iter()
        .filter_map(|(_, x)| match x {
            ServerTransmit::SseEvent {
                stream,
                msg: Message::Result(r),
                event_id,
            } => Some((
                *stream,
                r.result_type.map(|t| t.as_str()),
                event_id.is_some(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        vec![
            (StreamId(2), Some("complete"), false),
            (StreamId(5), None, true),
        ],
        "the modern call ends modern (resultType, no event ids), the second session's legacy \
         (no resultType, resumable events); the cancelled one sends nothing"
    );
}
