//! A recorded server played back by the reference server (`mcp-sim serve --from`).
//!
//! The reference server keeps everything the protocol decides: eras, the handshake,
//! sessions, streams, SSE framing, ids of its own, the refusal of a bad request. The recording
//! decides the rest of each call it holds: what the recorded server sent for it, in order,
//! each message at its recorded offset from its cause in the new run (the request's receipt,
//! the call's previous message, the cancel's receipt), with the new client's id and progress
//! token in place of the recorded ones. A token the recorded request did not carry (a forged
//! one) is sent as recorded: that is the recorded server's bug, played back.
//!
//! After a cancel, [`OnCancel::Recorded`] sends what the recorded server sent after its
//! cancel (a code-0 answer, a progress tail), timed from the new cancel's receipt, so that a
//! client under test meets the real server's bug; [`OnCancel::Correct`] stops, as the
//! reference does. A cancel of a call the recording saw run to its end is met correctly.
//! A call the recording saw cancelled but the new client lets run has no recorded answer:
//! [`OnMiss::Error`] answers `-32603` naming the gap, [`OnMiss::Reference`] a result
//! (extrapolated). A request no recorded call matches is answered the same two ways (the
//! reference serves it as its own).
//!
//! Each message written is marked in the trace: `recorded` with the line of the recording it
//! came from, or `extrapolated` ([`Server::origin_of`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::model::server_eras::JobKey;
use crate::model::StreamId;
use crate::time::Time;
use crate::wire::{
    codes, Era, ErrorResponse, Message, ProgressToken, Request, RequestId, ResultResponse,
};

use super::config::ResponseMode;
use super::{keepalive_due, Server};
use crate::model::recorded::{MatchMode, Matcher, Miss, Origin, Recording, LIFECYCLE};
use crate::wire::{decode_with, DecodeOptions, META_CLIENT_CAPABILITIES};

/// What the recorded server does after a cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCancel {
    /// What the recording holds after its cancel, bugs included.
    Recorded,
    /// Stop, as a correct server does.
    Correct,
    /// As [`OnCancel::Recorded`], after sending at once what the recording sent before its
    /// cancel and the new run has due within this long of the new cancel's receipt: the
    /// recorded server had sent it when it read its cancel, so the new client's cancel
    /// crosses it as the recorded one did, even when the wall clock brings the cancel a few
    /// ms early (`serve --scenario`, which plays a neighbour's crossing).
    AsPlanned(Duration),
}

/// What the server does for what the recording does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMiss {
    /// Answer `-32603`, naming what is missing.
    Error,
    /// Serve it as the reference server would (extrapolated).
    Reference,
}

/// A recording to play back, and how.
#[derive(Debug, Clone)]
pub struct Playback {
    /// The recording.
    pub recording: Arc<Recording>,
    /// How a request finds its recorded call.
    pub matching: MatchMode,
    /// After a cancel.
    pub on_cancel: OnCancel,
    /// For what the recording does not hold.
    pub on_miss: OnMiss,
}

/// How a playback went, for the verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlaybackCounts {
    /// Requests that found their recorded call.
    pub matched: usize,
    /// Requests the recording does not hold.
    pub missed: usize,
    /// Messages sent as recorded.
    pub recorded: usize,
    /// Messages the recording did not hold (a miss's answer, an answer it never saw).
    pub extrapolated: usize,
    /// Recorded messages that could not be sent (not a message this server can write, or a
    /// progress notification for a request that asked for none).
    pub dropped: usize,
    /// The recorded server's own requests (sampling, roots, elicitation) sent, under fresh
    /// ids of this server's.
    pub own_requests: usize,
    /// How many of them the new client answered (matched back by their fresh ids).
    pub own_answered: usize,
}

/// The playback's state in the server.
#[derive(Debug, Clone)]
pub(super) struct Player {
    playback: Playback,
    matcher: Matcher,
    calls: BTreeMap<JobKey, Playing>,
    /// Messages queued with their origin, by [`origin_key`], in order.
    origins: VecDeque<(String, Origin)>,
    /// Requests left to the reference server (a miss under [`OnMiss::Reference`]): their
    /// answers are extrapolated.
    left_to_reference: BTreeSet<RequestId>,
    /// The recorded server's own requests sent, by the fresh id they went out under: the
    /// recorded id they stand for.
    own: BTreeMap<RequestId, RequestId>,
    pub(super) counts: PlaybackCounts,
}

/// One call being played.
#[derive(Debug, Clone)]
struct Playing {
    stream: Option<StreamId>,
    call: usize,
    /// The next recorded message, and when it is due.
    next: usize,
    due: Option<Time>,
    /// The new request's id and progress token.
    id: RequestId,
    token: Option<ProgressToken>,
    /// The new client cancelled it, and the recording's tail after its cancel is played.
    cancelled: bool,
    answered: bool,
    /// When the server read the request.
    received: Time,
    /// When it last wrote on the call's stream (its keep-alives count from it).
    last_write: Time,
}

impl Playing {
    /// How far into the recorded call's messages it may go: before a cancel, only what the
    /// recorded server sent before its own cancel; after one, the whole recording.
    fn end(&self, call: &crate::model::recorded::RecordedCall) -> usize {
        match self.cancelled {
            true => call.server.len(),
            false => call.before_cancel,
        }
    }
}

/// How long past the recorded cancel's time a played call waits for the new client's cancel
/// before it takes the call as not cancelled (and the recording as holding no answer).
pub const CANCEL_WAIT: Duration = Duration::from_secs(1);

impl Player {
    pub(super) fn new(playback: Playback) -> Self {
        Player {
            matcher: Matcher::new(&playback.recording, playback.matching),
            playback,
            calls: BTreeMap::new(),
            origins: VecDeque::new(),
            left_to_reference: BTreeSet::new(),
            own: BTreeMap::new(),
            counts: PlaybackCounts::default(),
        }
    }
}

/// What identifies a message between its queueing and its recording, whatever the era's
/// seam does to it (a legacy result loses its `resultType`): its id and kind, or its method
/// and progress.
fn origin_key(msg: &Message) -> String {
    match msg {
        Message::Result(r) => format!("result {}", r.id),
        Message::Error(e) => format!("error {:?}", e.id),
        Message::Progress(p) => format!("progress {:?} {}", p.token, p.progress),
        Message::Request(r) => format!("request {}", r.id),
        Message::Cancelled(c) => format!("cancelled {}", c.request_id),
        Message::Notification(n) => format!("notification {}", n.method),
    }
}

impl Server {
    /// The same server, playing `playback` back for the calls it holds.
    pub fn playing(mut self, playback: Playback) -> Self {
        self.player = Some(Box::new(Player::new(playback)));
        self
    }

    /// How the playback went; `None` for the reference server.
    pub fn playback_counts(&self) -> Option<PlaybackCounts> {
        self.player.as_ref().map(|p| p.counts)
    }

    /// Where the message `msg` this server wrote came from, when it plays a recording (the
    /// recorder asks as it records the send).
    pub fn origin_of(&mut self, msg: &Message) -> Option<Origin> {
        let player = self.player.as_mut()?;
        if let Some(id) = msg.id() {
            if msg.is_response() && player.left_to_reference.remove(id) {
                return Some(Origin::Extrapolated);
            }
        }
        let key = origin_key(msg);
        let at = player.origins.iter().position(|(k, _)| *k == key)?;
        player.origins.remove(at).map(|(_, o)| o)
    }

    /// A request the recording may hold: played back, answered for a miss, or left to the
    /// reference (`false`).
    pub(super) fn play(&mut self, now: Time, stream: Option<StreamId>, r: &Request) -> bool {
        let Some(player) = self.player.as_mut() else {
            return false;
        };
        if LIFECYCLE.contains(&&*r.method) {
            return false;
        }
        let recording = Arc::clone(&player.playback.recording);
        // The `_meta` strict matching compares (the token and the version are the client's own).
        let mut meta = r.meta.other.clone();
        if !r.meta.legacy {
            let caps = Value::Object(r.meta.client_capabilities.clone());
            meta.insert(META_CLIENT_CAPABILITIES.into(), caps);
        }
        let mut params = r.params.clone();
        params.insert("_meta".into(), Value::Object(meta));
        let k = match player.matcher.take(&recording, &r.method, &params) {
            Ok(k) => k,
            Err(miss) => {
                player.counts.missed += 1;
                if player.playback.on_miss == OnMiss::Reference {
                    player.counts.extrapolated += 1;
                    player.left_to_reference.insert(r.id.clone());
                    return false;
                }
                let why = miss_text(&miss, &recording);
                let e = ErrorResponse::new(Some(r.id.clone()), codes::INTERNAL_ERROR, why);
                self.respond_with(stream, e.into(), 200, Origin::Extrapolated);
                return true;
            }
        };
        player.counts.matched += 1;
        let key = self.key(stream, r.id.clone());
        if let (Some(s), ResponseMode::Sse) = (stream, self.config.behaviour.response_mode) {
            self.sse_start(s);
        }
        let first = recording.calls[k].server.first();
        let due = first.map(|e| now + Duration::from_millis(e.offset_ms));
        let playing = Playing {
            stream,
            call: k,
            next: 0,
            due,
            id: r.id.clone(),
            token: r.meta.progress_token.clone(),
            cancelled: false,
            answered: false,
            received: now,
            last_write: now,
        };
        self.player_mut().calls.insert(key.clone(), playing);
        self.settle(now, &key);
        true
    }

    fn player_mut(&mut self) -> &mut Player {
        self.player.as_mut().expect("only a playing server plays")
    }

    /// Whether request `key` is being played.
    pub(super) fn is_playing(&self, key: &JobKey) -> bool {
        self.player
            .as_ref()
            .is_some_and(|p| p.calls.contains_key(key))
    }

    /// The call being played on HTTP stream `stream`, if one is.
    pub(super) fn playing_on(&self, stream: StreamId) -> Option<JobKey> {
        let player = self.player.as_ref()?;
        player
            .calls
            .iter()
            .find(|(_, p)| p.stream == Some(stream))
            .map(|(k, _)| k.clone())
    }

    /// The recorded server's own words in its `initialize` result (capabilities, server info,
    /// instructions) put in `result`, when it plays a recording that holds them.
    pub(super) fn recorded_introduction(&self, result: &mut Map<String, Value>) {
        let recording = self.player.as_ref().map(|p| &p.playback.recording);
        let recorded = recording.and_then(|r| r.initialize.as_ref());
        introduce(
            result,
            recorded,
            &["capabilities", "serverInfo", "instructions"],
        );
    }

    /// The same for a `server/discover` result: the recorded capabilities, instructions and
    /// `_meta` (where 2026-07-28 puts the server's name). The versions stay this server's:
    /// the protocol decides them, and it speaks what it says.
    pub(super) fn recorded_discovery(&self, result: &mut Map<String, Value>) {
        let recording = self.player.as_ref().map(|p| &p.playback.recording);
        let recorded = recording.and_then(|r| r.discover.as_ref());
        introduce(result, recorded, &["capabilities", "instructions", "_meta"]);
    }
}

/// `members` of the recorded introduction `recorded` put in `result`.
fn introduce(
    result: &mut Map<String, Value>,
    recorded: Option<&Map<String, Value>>,
    members: &[&str],
) {
    let Some(recorded) = recorded else {
        return;
    };
    for &member in members {
        if let Some(v) = recorded.get(member) {
            result.insert(member.into(), v.clone());
        }
    }
}

impl Server {
    /// The next message or keep-alive of any call due, if the server plays.
    pub(super) fn playback_due(&self) -> Option<Time> {
        let player = self.player.as_ref()?;
        let keepalive = self.keepalive_interval();
        player
            .calls
            .values()
            .flat_map(|p| {
                let ka = keepalive
                    .filter(|_| p.stream.is_some())
                    .map(|k| p.last_write + k);
                p.due.into_iter().chain(ka)
            })
            .min()
    }

    /// Sends every recorded message due at `now`, and the keep-alives of quiet streams (the
    /// protocol's, which the reference keeps doing).
    pub(super) fn playback_timers(&mut self, now: Time) {
        let keys: Vec<JobKey> = match &self.player {
            Some(p) => p.calls.keys().cloned().collect(),
            None => return,
        };
        let keepalive = self.keepalive_interval();
        for key in keys {
            while self
                .player
                .as_ref()
                .and_then(|p| p.calls.get(&key))
                .is_some_and(|p| p.due.is_some_and(|d| d <= now))
            {
                self.emit(now, &key);
            }
            let player = self.player.as_mut().expect("playing");
            if let Some(p) = player.calls.get_mut(&key) {
                let comment = keepalive_due(now, keepalive, p.stream, &mut p.last_write);
                self.transmits.extend(comment);
            }
        }
    }

    /// The new client cancelled call `key`: the recorded tail after the recorded cancel, or
    /// nothing more.
    pub(super) fn playback_cancelled(&mut self, now: Time, key: &JobKey) {
        let Some(on_cancel) = self.player.as_ref().map(|p| p.playback.on_cancel) else {
            return;
        };
        if let OnCancel::AsPlanned(within) = on_cancel {
            self.cross(now, key, within);
        }
        let Some(player) = self.player.as_mut() else {
            return;
        };
        let recording = Arc::clone(&player.playback.recording);
        let recorded = on_cancel != OnCancel::Correct;
        let Some(p) = player.calls.get_mut(key) else {
            return;
        };
        // A cancel of a call already answered names nothing: what the recording sent after
        // its answer (progress after completion) goes on.
        if p.answered {
            return;
        }
        let call = &recording.calls[p.call];
        let had_cancel = call.cancel_seen_ms.is_some();
        if !recorded || !had_cancel || p.cancelled {
            player.calls.remove(key);
            return;
        }
        p.cancelled = true;
        p.next = call.before_cancel;
        p.due = call
            .server
            .get(p.next)
            .map(|e| now + Duration::from_millis(e.offset_ms));
        if p.due.is_none() {
            player.calls.remove(key);
        }
    }

    /// Sends now what call `key`'s recording sent before its cancel and is due within
    /// `within` of `now` ([`OnCancel::AsPlanned`]).
    fn cross(&mut self, now: Time, key: &JobKey, within: Duration) {
        let recording = match &self.player {
            Some(p) => Arc::clone(&p.playback.recording),
            None => return,
        };
        loop {
            let Some(p) = self.player.as_ref().and_then(|p| p.calls.get(key)) else {
                return;
            };
            let call = &recording.calls[p.call];
            if p.cancelled || p.answered || p.next >= call.before_cancel {
                return;
            }
            let Some(due) = p.due.filter(|&d| d <= now + within) else {
                return;
            };
            // The one after it keeps its planned time.
            let following = call
                .server
                .get(p.next + 1)
                .map(|e| due + Duration::from_millis(e.offset_ms));
            self.emit(now, key);
            let player = self.player.as_mut().expect("playing");
            if let Some(p) = player.calls.get_mut(key) {
                if p.next < call.before_cancel && !p.answered {
                    p.due = following;
                }
            }
        }
    }

    /// Sends the next recorded message of `key`, then times the one after it.
    fn emit(&mut self, now: Time, key: &JobKey) {
        let player = self.player.as_mut().expect("playing");
        let recording = Arc::clone(&player.playback.recording);
        let Some(p) = player.calls.get_mut(key) else {
            return;
        };
        let call = &recording.calls[p.call];
        let end = p.end(call);
        let Some(e) = call.server.get(p.next).filter(|_| p.next < end) else {
            return self.settle(now, key);
        };
        p.next += 1;
        p.last_write = now;
        let (stream, line) = (p.stream, e.line);
        let msg = rewrite(
            &e.msg,
            call.id.as_ref(),
            call.token.as_ref(),
            &p.id,
            p.token.as_ref(),
        );
        let options = lenient(recording.era);
        let decoded = msg.and_then(|m| decode_with(m.to_string().as_bytes(), &options).ok());
        match decoded {
            Some(m) if e.is_answer => {
                p.answered = true;
                self.answered.insert(key.clone());
                self.respond_with(stream, m, 200, Origin::Recorded { line });
                self.player_mut().counts.recorded += 1;
            }
            Some(m) => {
                let m = self.own_ids(m);
                self.send_with(stream, m, Origin::Recorded { line });
                self.player_mut().counts.recorded += 1;
            }
            None => self.player_mut().counts.dropped += 1,
        }
        self.settle(now, key);
    }

    /// The recorded server's own request under a fresh id of this server's (the new client
    /// may hold the recorded one for a request of its own), and its cancel naming that id.
    fn own_ids(&mut self, msg: Message) -> Message {
        match msg {
            Message::Request(mut q) => {
                let fresh = self.own_request_id();
                let player = self.player_mut();
                player
                    .own
                    .insert(fresh.clone(), std::mem::replace(&mut q.id, fresh));
                player.counts.own_requests += 1;
                Message::Request(q)
            }
            Message::Cancelled(mut c) => {
                let player = self.player_mut();
                let fresh = player.own.iter().find(|(_, r)| **r == c.request_id);
                if let Some((fresh, _)) = fresh {
                    c.request_id = fresh.clone();
                }
                Message::Cancelled(c)
            }
            other => other,
        }
    }

    /// The client answered `id`: counted when it is one of the recorded server's own
    /// requests played back.
    pub(super) fn playback_answered(&mut self, id: &RequestId) {
        if let Some(player) = self.player.as_mut() {
            if player.own.remove(id).is_some() {
                player.counts.own_answered += 1;
            }
        }
    }

    /// Times the next message of `key`, or ends the call: after its answer and whatever the
    /// recording sent after it, or without an answer when the recording holds none (then as
    /// [`OnMiss`] says).
    fn settle(&mut self, now: Time, key: &JobKey) {
        let player = self.player.as_mut().expect("playing");
        let recording = Arc::clone(&player.playback.recording);
        let on_miss = player.playback.on_miss;
        let Some(p) = player.calls.get_mut(key) else {
            return;
        };
        let call = &recording.calls[p.call];
        let end = p.end(call);
        if p.next < end {
            let e = &call.server[p.next];
            p.due = Some(now + Duration::from_millis(e.offset_ms));
            return;
        }
        if p.answered || p.cancelled {
            player.calls.remove(key);
            return;
        }
        // The recording ends before an answer: its client cancelled this call. Wait for this
        // client's cancel until a while past the recorded one's time.
        let wait = call
            .cancel_seen_ms
            .map(|c| p.received + Duration::from_millis(c) + CANCEL_WAIT);
        if let Some(until) = wait.filter(|&until| now < until) {
            p.due = Some(until);
            return;
        }
        let (stream, id) = (p.stream, p.id.clone());
        player.calls.remove(key);
        self.answered.insert(key.clone());
        let msg: Message = match on_miss {
            OnMiss::Error => ErrorResponse::new(
                Some(id),
                codes::INTERNAL_ERROR,
                format!(
                    "the recording holds no answer to this call (recorded call {}, line {}): \
                     its client cancelled it",
                    call_label(call),
                    call.line
                ),
            )
            .into(),
            OnMiss::Reference => {
                let mut res = ResultResponse::complete(id);
                res.result.insert(
                    "content".into(),
                    json!([{"type": "text", "text": "extrapolated: the recording ends before an answer"}]),
                );
                res.into()
            }
        };
        self.player_mut().counts.extrapolated += 1;
        self.respond_with(stream, msg, 200, Origin::Extrapolated);
    }

    /// [`Server::respond`], the message's origin noted.
    fn respond_with(&mut self, stream: Option<StreamId>, msg: Message, status: u16, o: Origin) {
        self.note_origin(&msg, o);
        self.respond(stream, msg, status);
    }

    /// [`Server::send`], the message's origin noted.
    fn send_with(&mut self, stream: Option<StreamId>, msg: Message, o: Origin) {
        self.note_origin(&msg, o);
        self.send(stream, msg);
    }

    fn note_origin(&mut self, msg: &Message, origin: Origin) {
        if let Some(player) = self.player.as_mut() {
            player.origins.push_back((origin_key(msg), origin));
        }
    }
}

/// A recorded call in a few words: its method and tool.
fn call_label(call: &crate::model::recorded::RecordedCall) -> String {
    match call.params.get("name").and_then(Value::as_str) {
        Some(tool) => format!("{} {tool}", call.method),
        None => call.method.clone(),
    }
}

fn miss_text(miss: &Miss, recording: &Recording) -> String {
    match miss.closest {
        Some(k) => format!(
            "the recording holds no such request; the closest is recorded call {} (line {}), \
             which differs at {}",
            k + 1,
            recording.calls[k].line,
            miss.differs_at
        ),
        None => format!("the recording holds no such request: {}", miss.differs_at),
    }
}

/// Recorded messages are read leniently, in the recording's era: the recorded server's own
/// shapes are played back, as far as this server can write them.
fn lenient(era: Era) -> DecodeOptions {
    DecodeOptions {
        allow_null_error_id: true,
        allow_integral_float_ids: true,
        era,
        ..DecodeOptions::default()
    }
}

/// `msg` with the recorded request's id and token replaced by the new request's; `None` for a
/// progress notification when the new request asked for no progress (a correct server sends
/// none then).
fn rewrite(
    msg: &Value,
    recorded_id: Option<&RequestId>,
    recorded_token: Option<&ProgressToken>,
    id: &RequestId,
    token: Option<&ProgressToken>,
) -> Option<Value> {
    let mut msg = msg.clone();
    let obj = msg.as_object_mut()?;
    if obj.contains_key("result") || obj.contains_key("error") {
        if recorded_id.is_some_and(|r| obj.get("id") == Some(&r.to_json())) {
            obj.insert("id".into(), id.to_json());
        }
        return Some(msg);
    }
    if obj.get("method").and_then(Value::as_str) == Some("notifications/progress") {
        let params = obj.get_mut("params")?.as_object_mut()?;
        let named = params.get("progressToken").cloned();
        if recorded_token.is_some_and(|t| named.as_ref() == Some(&t.to_json())) {
            params.insert("progressToken".into(), token?.to_json());
        }
    }
    Some(msg)
}
