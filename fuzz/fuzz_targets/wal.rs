//! Fuzz target `wal`: WAL segments decoded as a restart decodes them
//! (`actcd_wal::replay_segments`, the same per-segment scan `Wal::open` runs: record framing,
//! the CRC chain, the segment header, torn tails, entry overwrites and snapshot marks). The
//! first byte says how many segments (1 to 3); for each but the last, two bytes (LE) give its
//! length; the rest are the segments' bytes in order.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&count, mut rest)) = data.split_first() else {
        return;
    };
    let count = usize::from(count % 3) + 1;
    let mut lens = Vec::new();
    for _ in 1..count {
        let Some((len, after)) = rest.split_first_chunk::<2>() else {
            return;
        };
        lens.push(usize::from(u16::from_le_bytes(*len)));
        rest = after;
    }
    let mut segments = Vec::new();
    for len in lens {
        let (segment, after) = rest.split_at(len.min(rest.len()));
        segments.push(segment);
        rest = after;
    }
    segments.push(rest);
    if let Ok(contents) = actcd_wal::replay_segments(&segments) {
        // Entries are ascending and contiguous (overwrites applied), and no more than the
        // records that could fit in the input.
        let total: usize = segments.iter().map(|s| s.len()).sum();
        assert!(contents.entries.len() <= total / 9);
        for w in contents.entries.windows(2) {
            assert_eq!(w[1].index, w[0].index + 1, "entries must be contiguous");
        }
    }
});
