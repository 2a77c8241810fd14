//! Fuzz target `snapshot`: snapshot files as `actcd snapshot status|restore` read them
//! (`bolt::read`, then `from_etcd_buckets` for a restore), and the whole-store blob a follower
//! installs from its leader (`whole_store::decode`). The first byte picks which; the rest is
//! the file or blob.
#![no_main]

use actcd_etcd_snapshot::{bolt, from_etcd_buckets, whole_store};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, file)) = data.split_first() else {
        return;
    };
    if pick & 1 == 0 {
        if let Ok(db) = bolt::read(file) {
            // What is read is the file's own bytes: no more than the file holds.
            let copied: usize = db
                .buckets
                .iter()
                .map(|(n, pairs)| {
                    n.len() + pairs.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
                })
                .sum();
            assert!(
                copied <= file.len(),
                "{copied} bytes read out of a {}-byte file",
                file.len()
            );
            let _ = from_etcd_buckets(&db.buckets);
        }
    } else {
        let _ = whole_store::decode(file);
    }
});
