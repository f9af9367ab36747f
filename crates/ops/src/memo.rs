//! [`Memo`]: a thread-safe table that builds each value once (the loaded kernels of
//! [`crate::Ops`]).
//!
//! A plain `Mutex<HashMap>` checked before and filled after compiling lets several threads
//! that miss at the same time compile the same kernel in parallel. Here every key has its
//! own slot: the first thread builds the value while holding only that slot's lock, the
//! others wait on the slot and take its value; threads asking for other keys are not
//! blocked. A failed build leaves the slot empty, so the next call tries again.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

type Slot<V> = Arc<Mutex<Option<V>>>;

/// Values built once per key, shared by threads.
pub struct Memo<K, V> {
    slots: Mutex<HashMap<K, Slot<V>>>,
    builds: AtomicUsize,
}

impl<K: Eq + Hash + Clone, V: Clone> Default for Memo<K, V> {
    fn default() -> Self {
        Memo::new()
    }
}

impl<K: Eq + Hash + Clone, V: Clone> Memo<K, V> {
    /// An empty table.
    pub fn new() -> Self {
        Memo {
            slots: Mutex::new(HashMap::new()),
            builds: AtomicUsize::new(0),
        }
    }

    /// The value of `key`, built by `build` if no call built it yet. Concurrent calls for
    /// one key run `build` once; the others wait for its value.
    ///
    /// ```
    /// use rcute_ops::memo::Memo;
    /// let memo: Memo<u32, String> = Memo::new();
    /// let v = std::thread::scope(|s| {
    ///     let hs: Vec<_> = (0..8)
    ///         .map(|_| s.spawn(|| memo.get_or_try_build(&7, || Ok::<_, ()>("seven".to_string()))))
    ///         .collect();
    ///     hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect::<Vec<_>>()
    /// });
    /// assert!(v.iter().all(|s| s == "seven"));
    /// assert_eq!(memo.builds(), 1);
    /// ```
    pub fn get_or_try_build<E>(&self, key: &K, build: impl FnOnce() -> Result<V, E>) -> Result<V, E> {
        // A poisoned lock only means another thread panicked while holding it; the table
        // and the slots stay consistent (a slot is written only with a finished value).
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.entry(key.clone()).or_default().clone()
        };
        let mut value = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = value.as_ref() {
            return Ok(v.clone());
        }
        self.builds.fetch_add(1, Ordering::Relaxed);
        let v = build()?;
        *value = Some(v.clone());
        Ok(v)
    }

    /// The value of `key` if a build finished, without building (and `None` while one
    /// runs, rather than waiting for it).
    ///
    /// ```
    /// use rcute_ops::memo::Memo;
    /// let memo: Memo<u32, u32> = Memo::new();
    /// assert_eq!(memo.get(&1), None);
    /// memo.get_or_try_build(&1, || Ok::<_, ()>(10)).unwrap();
    /// assert_eq!((memo.get(&1), memo.builds()), (Some(10), 1));
    /// ```
    pub fn get(&self, key: &K) -> Option<V> {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)?
            .clone();
        let value = slot.try_lock().ok()?.clone();
        value
    }

    /// How many times a value was built (successful or not): what a test reads to see
    /// that concurrent callers did not build one key twice.
    pub fn builds(&self) -> usize {
        self.builds.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn eight_threads_build_each_key_once() {
        let memo: Memo<u32, u64> = Memo::new();
        let calls = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..8u32 {
                let (memo, calls) = (&memo, &calls);
                s.spawn(move || {
                    for key in [1u32, 2, 1, 2] {
                        let v = memo
                            .get_or_try_build(&key, || {
                                calls.fetch_add(1, Ordering::SeqCst);
                                // Slow enough that the other threads arrive while it builds.
                                std::thread::sleep(Duration::from_millis(50));
                                Ok::<_, ()>(u64::from(key) * 100)
                            })
                            .unwrap();
                        assert_eq!(v, u64::from(key) * 100, "thread {t}");
                    }
                });
            }
        });
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(memo.builds(), 2);
    }

    #[test]
    fn a_failed_build_is_retried() {
        let memo: Memo<u32, u32> = Memo::new();
        assert_eq!(memo.get_or_try_build(&1, || Err("no")), Err("no"));
        assert_eq!(memo.get_or_try_build(&1, || Ok::<_, &str>(5)), Ok(5));
        assert_eq!(memo.get_or_try_build(&1, || Err("not called")), Ok(5));
        assert_eq!(memo.builds(), 2);
    }
}
