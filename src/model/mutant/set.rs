//! Which mutants are on.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Mutant, ALL};

/// A set of mutants (the reference has none), one bit per mutant: room for 128.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MutantSet(u128);

const _: () = assert!(ALL.len() <= 128, "MutantSet has one bit per mutant");

impl MutantSet {
    /// No mutant: the reference behaviour.
    pub const NONE: MutantSet = MutantSet(0);

    /// This set plus `m`.
    pub const fn with(self, m: Mutant) -> MutantSet {
        MutantSet(self.0 | 1 << m as u8)
    }

    /// Whether `m` is in the set.
    pub fn has(self, m: Mutant) -> bool {
        self.0 & (1 << m as u8) != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The union of two sets.
    pub fn union(self, other: MutantSet) -> MutantSet {
        MutantSet(self.0 | other.0)
    }

    /// The mutants in the set, in catalog order.
    pub fn iter(self) -> impl Iterator<Item = Mutant> {
        ALL.iter().copied().filter(move |m| self.has(*m))
    }
}

/// A set is the list of its mutants' names in files, in catalog order (`[]` for none).
impl Serialize for MutantSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for MutantSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MutantSet, D::Error> {
        let list = Vec::<Mutant>::deserialize(d)?;
        Ok(list.into_iter().fold(MutantSet::NONE, MutantSet::with))
    }
}

impl fmt::Display for MutantSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(|m| m.info().name).collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join("+"))
        }
    }
}
