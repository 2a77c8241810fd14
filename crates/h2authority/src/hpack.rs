//! The HPACK decoder (RFC 7541) that follows a client's encoder: integers, string literals
//! (raw or Huffman-coded), the static table and the client's dynamic table. Written for
//! [`crate::AuthorityRewriter`], which decodes every header block a client sends, so the
//! ordinary path allocates only for entries added to the dynamic table and Huffman decoding
//! walks a canonical code (no table built per string).

use std::collections::VecDeque;
use std::sync::LazyLock;

/// HPACK's static table (RFC 7541, Appendix A); entry `i` has index `i + 1`.
pub(crate) const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The length in bits of each symbol's Huffman code (RFC 7541, Appendix B), symbols 0–255
/// and EOS (256). The code is canonical: codes are assigned in order of length, then symbol,
/// so the lengths alone define it.
const HUFFMAN_CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// The Huffman code arranged for canonical decoding: per code length, the first code of that
/// length, how many codes have it, and where their symbols start in `symbols`.
struct Canonical {
    first_code: [u32; 31],
    count: [u32; 31],
    first_index: [usize; 31],
    /// Symbols ordered by (code length, symbol).
    symbols: Vec<u16>,
}

static HUFFMAN: LazyLock<Canonical> = LazyLock::new(|| {
    let mut symbols: Vec<u16> = (0..257).collect();
    symbols.sort_by_key(|&s| (HUFFMAN_CODE_LENGTHS[usize::from(s)], s));
    let mut count = [0u32; 31];
    for &len in &HUFFMAN_CODE_LENGTHS {
        count[usize::from(len)] += 1;
    }
    let (mut first_code, mut first_index) = ([0u32; 31], [0usize; 31]);
    let (mut code, mut index) = (0u32, 0usize);
    for len in 1..31 {
        code = (code + count[len - 1]) << 1;
        first_code[len] = code;
        first_index[len] = index;
        index += count[len] as usize;
    }
    Canonical {
        first_code,
        count,
        first_index,
        symbols,
    }
});

/// A header block HTTP/2 must refuse (a COMPRESSION_ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Appends the Huffman-decoded `coded` to `out` (RFC 7541, 5.2): padding of at most 7 bits,
/// all ones; EOS never inside.
fn huffman_decode(coded: &[u8], out: &mut Vec<u8>) -> Result<(), Malformed> {
    let table = &*HUFFMAN;
    let (mut code, mut len) = (0u32, 0usize);
    for &byte in coded {
        for shift in (0..8).rev() {
            code = code << 1 | u32::from(byte >> shift & 1);
            len += 1;
            if len > 30 {
                return Err(Malformed);
            }
            let offset = code.wrapping_sub(table.first_code[len]);
            if offset < table.count[len] {
                let symbol = table.symbols[table.first_index[len] + offset as usize];
                let Ok(symbol) = u8::try_from(symbol) else {
                    return Err(Malformed);
                };
                out.push(symbol);
                code = 0;
                len = 0;
            }
        }
    }
    if len > 7 || code != (1 << len) - 1 {
        return Err(Malformed);
    }
    Ok(())
}

/// An integer with an `prefix`-bit prefix at the start of `buf` (RFC 7541, 5.1): its value
/// and the bytes it took.
fn integer(buf: &[u8], prefix: u32) -> Result<(usize, usize), Malformed> {
    let max = (1usize << prefix) - 1;
    let first = usize::from(*buf.first().ok_or(Malformed)?) & max;
    if first < max {
        return Ok((first, 1));
    }
    let mut value = max;
    for (i, &byte) in buf.iter().enumerate().skip(1).take(4) {
        value += usize::from(byte & 0x7f) << (7 * (i - 1));
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(Malformed)
}

/// A string literal at the start of `buf` (RFC 7541, 5.2): its octets (in `buf`, or decoded
/// into `scratch`) and the bytes it took.
fn string<'a>(buf: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<(&'a [u8], usize), Malformed> {
    let (len, n) = integer(buf, 7)?;
    let raw = buf
        .get(n..n.checked_add(len).ok_or(Malformed)?)
        .ok_or(Malformed)?;
    if buf[0] & 0x80 == 0 {
        return Ok((raw, n + len));
    }
    scratch.clear();
    huffman_decode(raw, scratch)?;
    Ok((scratch.as_slice(), n + len))
}

/// A dynamic table entry: name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// The decoding side of one connection's HPACK context.
pub struct Decoder {
    /// The dynamic table, newest entry first.
    dynamic: VecDeque<Entry>,
    /// Its size as HPACK counts it (each entry: name, value and 32).
    size: usize,
    /// Its current maximum size, as the client last set it.
    max_size: usize,
    /// The most the client may set: the server's SETTINGS_HEADER_TABLE_SIZE.
    allowed: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Decoder {
    /// A decoder whose dynamic table starts at, and may grow to, `allowed` bytes.
    pub fn new(allowed: usize) -> Self {
        Decoder {
            dynamic: VecDeque::new(),
            size: 0,
            max_size: allowed,
            allowed,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), Malformed> {
        match index {
            0 => Err(Malformed),
            1..=61 => {
                let (name, value) = STATIC_TABLE[index - 1];
                Ok((name.as_bytes(), value.as_bytes()))
            }
            _ => self
                .dynamic
                .get(index - 62)
                .map(|(n, v)| (&n[..], &v[..]))
                .ok_or(Malformed),
        }
    }

    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            let Some((name, value)) = self.dynamic.pop_back() else {
                break;
            };
            self.size -= name.len() + value.len() + 32;
        }
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + 32;
        if size > self.max_size {
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max_size - size);
        self.dynamic.push_front((name.into(), value.into()));
        self.size += size;
    }

    /// Decodes header block `block`, calling `field` with each name and value in order and
    /// updating the dynamic table as the client's encoder did.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Malformed> {
        let (mut name_buf, mut value_buf) = (
            std::mem::take(&mut self.name),
            std::mem::take(&mut self.value),
        );
        let decoded = self.decode_with(block, &mut field, &mut name_buf, &mut value_buf);
        (self.name, self.value) = (name_buf, value_buf);
        decoded
    }

    fn decode_with(
        &mut self,
        block: &[u8],
        field: &mut impl FnMut(&[u8], &[u8]),
        name_buf: &mut Vec<u8>,
        value_buf: &mut Vec<u8>,
    ) -> Result<(), Malformed> {
        let mut at = 0;
        while at < block.len() {
            let rest = &block[at..];
            let first = rest[0];
            if first & 0x80 != 0 {
                // Indexed field (6.1).
                let (index, n) = integer(rest, 7)?;
                let (name, value) = self.entry(index)?;
                field(name, value);
                at += n;
                continue;
            }
            if first & 0xe0 == 0x20 {
                // Dynamic table size update (6.3).
                let (max_size, n) = integer(rest, 5)?;
                if max_size > self.allowed {
                    return Err(Malformed);
                }
                self.max_size = max_size;
                self.evict_to(max_size);
                at += n;
                continue;
            }
            // A literal (6.2): with incremental indexing (01), without indexing (0000) or
            // never indexed (0001).
            let indexing = first & 0x40 != 0;
            let (index, mut n) = integer(rest, if indexing { 6 } else { 4 })?;
            let name: &[u8] = if index == 0 {
                let (name, used) = string(&rest[n..], name_buf)?;
                n += used;
                name
            } else {
                let (name, _) = self.entry(index)?;
                name_buf.clear();
                name_buf.extend_from_slice(name);
                name_buf
            };
            let (value, used) = string(rest.get(n..).ok_or(Malformed)?, value_buf)?;
            n += used;
            field(name, value);
            if indexing {
                self.insert(name, value);
            }
            at += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn fields(decoder: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, Malformed> {
        let mut got = Vec::new();
        decoder.decode(block, |n, v| {
            got.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ));
        })?;
        Ok(got)
    }

    fn want(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn rfc_7541_c4_requests_with_huffman_coding() {
        // RFC 7541, C.4.1–C.4.3: three requests on one connection, each referring to entries
        // the ones before added; the table's size after each is the RFC's.
        let mut decoder = Decoder::new(4096);
        let first = hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff");
        assert_eq!(
            fields(&mut decoder, &first).unwrap(),
            want(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
            ])
        );
        assert_eq!(decoder.size, 57);
        let second = hex("8286 84be 5886 a8eb 1064 9cbf");
        assert_eq!(
            fields(&mut decoder, &second).unwrap(),
            want(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
                ("cache-control", "no-cache"),
            ])
        );
        assert_eq!(decoder.size, 110);
        let third = hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
        assert_eq!(
            fields(&mut decoder, &third).unwrap(),
            want(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ])
        );
        assert_eq!(decoder.size, 164);
    }

    #[test]
    fn rfc_7541_c5_eviction_with_a_small_table() {
        // RFC 7541, C.5.1–C.5.2 (responses, raw strings) with a 256-byte table: the second
        // response evicts the oldest entry and refers to the others.
        let mut decoder = Decoder::new(256);
        let first = hex(
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
             6c65 2e63 6f6d",
        );
        fields(&mut decoder, &first).unwrap();
        assert_eq!(decoder.size, 222);
        let second = hex("4803 3330 37c1 c0bf");
        assert_eq!(
            fields(&mut decoder, &second).unwrap(),
            want(&[
                (":status", "307"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com"),
            ])
        );
        assert_eq!(decoder.size, 222);
    }

    #[test]
    fn malformed_blocks_are_refused() {
        struct Case {
            what: &'static str,
            block: Vec<u8>,
        }
        let cases = [
            Case {
                what: "index 0",
                block: vec![0x80],
            },
            Case {
                what: "index past the tables",
                block: vec![0x80 | 62],
            },
            Case {
                what: "integer cut short",
                block: vec![0xff, 0x80],
            },
            Case {
                what: "string cut short",
                block: vec![0x00, 0x05, b'a'],
            },
            Case {
                what: "table larger than allowed",
                block: vec![0x3f, 0xe2, 0x1f],
            },
            // "a" with 8 bits of padding, and with padding that is not all ones.
            Case {
                what: "padding too long",
                block: vec![0x00, 0x81, b'a', 0x82, 0x1f, 0xff],
            },
            Case {
                what: "padding not ones",
                block: vec![0x00, 0x81, b'a', 0x81, 0x18],
            },
        ];
        for case in cases {
            let got = Decoder::new(4096).decode(&case.block, |_, _| {});
            assert_eq!(got, Err(Malformed), "{}", case.what);
        }
    }
}
