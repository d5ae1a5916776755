//! Sending a request: its id and progress token, its shape in the era spoken, the stream
//! it goes on, and its place behind an unfinished opening.

use std::collections::VecDeque;

use crate::model::mutant::Mutant;
use crate::model::{StreamId, Transport};
use crate::time::Time;
use crate::wire::{Message, ProgressToken, Request, RequestId};

use super::config::CallSpec;
use super::conn::Handshake;
use super::output::ClientTransmit;
use super::session::Resume;
use super::{Client, Pending, Purpose};

impl Client {
    pub(super) fn issue(
        &mut self,
        now: Time,
        spec: CallSpec,
        retries_left: u32,
        purpose: Purpose,
    ) -> RequestId {
        self.issue_with_token(now, spec, retries_left, purpose, None)
    }

    /// Sends a request; `reuse` is the token of the faulty retry of
    /// [`Mutant::RetryReusesToken`].
    pub(super) fn issue_with_token(
        &mut self,
        now: Time,
        spec: CallSpec,
        retries_left: u32,
        purpose: Purpose,
        reuse: Option<ProgressToken>,
    ) -> RequestId {
        let id = RequestId::Number(self.next_id);
        self.next_id += 1;
        let mut request = Request::new(id.clone(), spec.method.clone());
        request.params = spec.params.clone();
        if spec.task {
            request.declare_tasks();
        }
        // A client whose timer resets on progress must ask for progress (opencode #28186).
        let wants_token = spec.progress || spec.policy.reset_timeout_on_progress;
        let token = match wants_token {
            _ if self.mutant(Mutant::ResetWithoutToken) => None,
            true if self.mutant(Mutant::TokenReuseCrosswire) => Some(ProgressToken::from("p-1")),
            true if reuse.is_some() => reuse,
            true => {
                let t = ProgressToken::String(format!("p-{}", self.next_token));
                self.next_token += 1;
                Some(t)
            }
            false => None,
        };
        request.meta.progress_token = token.clone();
        if let Some(t) = &token {
            self.by_token.insert(t.clone(), id.clone());
        }
        self.legacy_shape(&mut request);
        let (stream, transmit) = self.addressed(request.into());
        if let Some(s) = stream {
            self.by_stream.insert(s, id.clone());
        }
        self.push_request(now, &id, transmit);
        let pending = Pending {
            spec,
            token,
            stream,
            sent: now,
            last_progress_at: None,
            last_progress: None,
            retries_left,
            received_any: false,
            purpose,
            rounds: 0,
            acked: false,
            resume: Resume::default(),
        };
        self.pending.insert(id.clone(), pending);
        id
    }

    /// The transmit that carries `msg`: a line on stdio, a POST on a new stream on HTTP.
    pub(super) fn addressed(&mut self, msg: Message) -> (Option<StreamId>, ClientTransmit) {
        match self.config.transport {
            Transport::Stdio => (None, ClientTransmit::Line(msg)),
            Transport::Http => {
                let stream = StreamId(self.next_stream);
                self.next_stream += 1;
                (Some(stream), ClientTransmit::Post { stream, msg })
            }
        }
    }

    /// A legacy request's shape: its era's version, no capabilities, no modern keys.
    pub(super) fn legacy_shape(&self, request: &mut Request) {
        if let Some(legacy) = self.conn.legacy() {
            request.meta.protocol_version = legacy.era().version().into();
            request.meta.client_capabilities.clear();
            request.meta.legacy = true;
        }
    }

    /// Sends a request, or holds it behind a legacy handshake (starting one if none is out).
    pub(super) fn push_request(&mut self, now: Time, id: &RequestId, transmit: ClientTransmit) {
        if matches!(self.conn.opening(), Handshake::NotStarted) {
            self.start_opening(now, VecDeque::new());
        }
        match self.conn.opening_mut() {
            Some(Handshake::Awaiting { queued, .. }) => queued.push_back((id.clone(), transmit)),
            _ => self.transmits.push_back(transmit),
        }
    }
}
