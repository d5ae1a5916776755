//! Giving a request up on the wire: the transport's cancellation (the notification on stdio
//! and in the legacy era over HTTP, the stream's close in 2026-07-28 over HTTP), and the
//! client mutants that get it wrong.

use crate::model::mutant::Mutant;
use crate::time::Time;
use crate::wire::{Cancelled, RequestId};

use super::output::{ClientEvent, ClientTransmit, Outcome};
use super::Client;

impl Client {
    /// Sends the transport's cancellation and reports `outcome`.
    pub(super) fn abandon(&mut self, _now: Time, id: &RequestId, reason: String, outcome: Outcome) {
        let Some(pending) = self.finish(id) else {
            return;
        };
        self.abandoned.insert(id.clone());
        if self.unqueue(id) {
            self.events.push_back(ClientEvent::Outcome {
                request: id.clone(),
                outcome,
            });
            return;
        }
        match pending.stream {
            Some(stream)
                if self.mutant(Mutant::CancelBlockedByPendingPost) && !pending.received_any =>
            {
                self.deferred_close.insert(stream);
            }
            // The legacy era cancels by notification on HTTP too (a POST answered 202); the
            // stream, of no more use, is dropped after it.
            // A request of a session the server forgot has nothing left to cancel; a server
            // that issued no session (the Python SDK's stateless mode) still gets the cancel.
            stream if self.legacy_http().is_some() => {
                let same_session = pending.resume.session.as_deref() == self.session();
                if same_session {
                    let mut cancel = Cancelled::new(id.clone());
                    cancel.reason = Some(reason);
                    let (_, post) = self.addressed(cancel.into());
                    self.transmits.push_back(post);
                }
                if let Some(stream) = stream {
                    self.transmits.push_back(ClientTransmit::Close { stream });
                }
            }
            Some(stream) => {
                self.transmits.push_back(ClientTransmit::Close { stream });
                if self.mutant(Mutant::CancelPostedOverHttp) {
                    let mut cancel = Cancelled::new(id.clone());
                    cancel.reason = Some(reason);
                    let (_, post) = self.addressed(cancel.into());
                    self.transmits.push_back(post);
                }
            }
            None => {
                let mut cancel = Cancelled::new(id.clone());
                cancel.reason = Some(reason);
                self.transmits
                    .push_back(ClientTransmit::Line(cancel.into()));
            }
        }
        self.events.push_back(ClientEvent::Outcome {
            request: id.clone(),
            outcome,
        });
    }
}
