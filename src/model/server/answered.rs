//! The requests a server answered lately: what a cancel racing an answer can still name.
//!
//! Only the faulty server of [`crate::model::Mutant::CancelCompleteRacePanics`] looks, and a
//! cancel races an answer by milliseconds, so the set keeps the last [`Answered::KEPT`]
//! answers and forgets the oldest: a server that answers clients for days holds a bounded
//! set, and no run of the simulation (a few dozen calls) comes near the bound.

use std::collections::{BTreeSet, VecDeque};

use crate::model::server_eras::JobKey;

/// The last [`Answered::KEPT`] requests answered.
#[derive(Debug, Clone, Default)]
pub(super) struct Answered {
    keys: BTreeSet<JobKey>,
    order: VecDeque<JobKey>,
}

impl Answered {
    /// How many answers are kept.
    pub(super) const KEPT: usize = 4096;

    /// `key` was answered.
    pub(super) fn insert(&mut self, key: JobKey) {
        if self.keys.insert(key.clone()) {
            self.order.push_back(key);
        }
        while self.order.len() > Self::KEPT {
            if let Some(oldest) = self.order.pop_front() {
                self.keys.remove(&oldest);
            }
        }
    }

    /// Whether `key` was answered lately.
    pub(super) fn contains(&self, key: &JobKey) -> bool {
        self.keys.contains(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::RequestId;

    #[test]
    fn it_keeps_the_last_answers_and_forgets_the_oldest() {
        let key = |n: i64| JobKey {
            scope: crate::model::server_eras::Scope::Pipe,
            id: RequestId::Number(n),
        };
        let mut a = Answered::default();
        for n in 0..(Answered::KEPT as i64 + 10) {
            a.insert(key(n));
        }
        assert!(!a.contains(&key(9)));
        assert!(a.contains(&key(10)));
        assert!(a.contains(&key(Answered::KEPT as i64 + 9)));
        assert_eq!(a.keys.len(), Answered::KEPT);
    }
}
