//! A map bounded in bytes, its oldest entries going first: what the kept answers
//! ([`super::answers`]) and an open index's kept hit pages (`search_index`) hold.

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Entries with a size each; inserting past the budget drops the oldest.
#[derive(Debug)]
pub(crate) struct BoundedFifo<K, V> {
    entries: HashMap<K, (V, usize)>,
    order: VecDeque<K>,
    bytes: usize,
    budget: usize,
}

impl<K: Hash + Eq + Clone, V> BoundedFifo<K, V> {
    pub fn new(budget: usize) -> Self {
        BoundedFifo {
            entries: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            budget,
        }
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.get(key).map(|(v, _)| v)
    }

    /// Keeps `value` of `size` bytes under `key`, unless the key is there already or the value
    /// alone is over the budget; then drops the oldest entries until the budget holds.
    pub fn insert(&mut self, key: K, value: V, size: usize) {
        if size > self.budget || self.entries.contains_key(&key) {
            return;
        }
        self.bytes += size;
        self.entries.insert(key.clone(), (value, size));
        self.order.push_back(key);
        while self.bytes > self.budget {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((_, gone)) = self.entries.remove(&oldest) {
                self.bytes -= gone;
            }
        }
    }

    /// Drops every entry (the budget stays); returns the bytes they took.
    pub fn clear(&mut self) -> usize {
        self.entries.clear();
        self.order.clear();
        std::mem::take(&mut self.bytes)
    }

    /// The sizes of the entries kept, summed.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_go_first_and_the_budget_holds() {
        let mut f = BoundedFifo::new(10);
        f.insert("a".to_owned(), 1, 4);
        f.insert("b".to_owned(), 2, 4);
        f.insert("a".to_owned(), 9, 1);
        assert_eq!((f.get("a"), f.bytes()), (Some(&1), 8));
        f.insert("c".to_owned(), 3, 4);
        assert_eq!(
            (f.get("a"), f.get("b"), f.get("c")),
            (None, Some(&2), Some(&3))
        );
        f.insert("big".to_owned(), 4, 11);
        assert_eq!((f.get("big"), f.bytes()), (None, 8));
    }
}
