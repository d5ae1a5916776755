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
