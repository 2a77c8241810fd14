//! Fuzz target `hpack`: header blocks through the HPACK decoder `actcd-h2authority` follows a
//! client's encoder with, one connection's blocks in turn on one decoder (the dynamic table
//! carries over). Each block is a length byte and that many bytes. Every field handed out must
//! be no larger than the block could describe: a name or value comes from the block itself
//! (at most 8/5 of its bytes once Huffman-decoded), from the static table, or from the
//! dynamic table (at most its 4096 bytes).
#![no_main]

use actcd_h2authority::hpack::Decoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut decoder = Decoder::new(4096);
    let mut rest = data;
    while let Some((&len, after)) = rest.split_first() {
        let len = usize::from(len).min(after.len());
        let (block, after) = after.split_at(len);
        rest = after;
        let bound = 4096 + block.len() * 8 / 5 + 64;
        let mut fields = 0usize;
        let decoded = decoder.decode(block, |name, value| {
            assert!(
                name.len() <= bound && value.len() <= bound,
                "field larger than its sources"
            );
            fields += 1;
        });
        // Every field takes at least one byte of the block.
        assert!(fields <= block.len());
        if decoded.is_err() {
            // A connection whose block does not decode is h2's to end: nothing follows.
            return;
        }
    }
});
