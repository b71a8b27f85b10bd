//! Pipeline stages: pure state machines fed entries (or, for the compaction cuts, lines newest
//! first).

pub mod branches;
pub mod compaction;
pub mod context;
pub mod dataset;
pub mod events;
pub mod model_context;
pub mod orphans;
pub mod repair;
pub mod threads;
pub mod validate;

/// Hash maps and sets keyed by ids from the transcript (call ids, uuids), hashed with xxh3:
/// SipHash showed per line in profiles, and the keys come from the user's own files, not from a
/// peer that could flood the table. The builder is xxh3's default (seed 0, its own secret): a
/// zero-sized one, where `Xxh3Builder` carries room for a 192-byte secret in every table and
/// copies it for every hash.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, xxhash_rust::xxh3::Xxh3DefaultBuilder>;
/// See [`Map`].
pub(crate) type Set<K> = std::collections::HashSet<K, xxhash_rust::xxh3::Xxh3DefaultBuilder>;
