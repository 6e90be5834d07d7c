//! Small real PDFs for tests that need a page's ink but not its look: nib refuses a "PDF" that
//! does not parse (`notebook::read_page_with`), so placeholder bytes after `%PDF-` no longer
//! pass for ink.

/// A one-page PDF (a blank A6 page) that parses, with `label` in a comment so that two
/// labels give two different files (a first and a second scan of a page). `label` is one line.
pub fn one_page(label: &str) -> Vec<u8> {
    assert!(!label.contains(['\r', '\n']), "one line");
    with_contents(label, b"<< /Length 0 >>\nstream\n\nendstream")
}

/// A one-page PDF whose page's content stream is a valid zlib stream that inflates to
/// `decoded` zero bytes (at least): a few hundred bytes per MiB, made by hand (fixed Huffman:
/// a zero, then copies of 258 bytes at distance 1) without inflating anything.
pub fn flate_bomb(decoded: usize) -> Vec<u8> {
    let copies = decoded.saturating_sub(1).div_ceil(258);
    let len = 1 + copies * 258;
    let mut bits = Bits::default();
    bits.put(1, 1); // the last block
    bits.put(1, 2); // fixed Huffman codes
    bits.code(0b0011_0000, 8); // the literal 0
    for _ in 0..copies {
        bits.code(0b1100_0101, 8); // length 258 (code 285)
        bits.code(0, 5); // distance 1
    }
    bits.code(0, 7); // end of block
    let mut data = vec![0x78, 0x01];
    data.extend_from_slice(&bits.bytes());
    // Adler-32 of `len` zeros: a stays 1, b adds it once per byte.
    let adler = (((len % 65521) as u32) << 16) | 1;
    data.extend_from_slice(&adler.to_be_bytes());
    let mut stream = format!(
        "<< /Length {} /Filter /FlateDecode >>\nstream\n",
        data.len()
    )
    .into_bytes();
    stream.extend_from_slice(&data);
    stream.extend_from_slice(b"\nendstream");
    with_contents("a bomb", &stream)
}

/// Bits written as deflate packs them: from each byte's low bit up.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    used: u32,
}

impl Bits {
    /// `n` bits of `value`, low bit first (a header field).
    fn put(&mut self, value: u32, n: u32) {
        for i in 0..n {
            if self.used.is_multiple_of(8) {
                self.out.push(0);
            }
            if (value >> i) & 1 == 1 {
                *self.out.last_mut().unwrap() |= 1 << (self.used % 8);
            }
            self.used += 1;
        }
    }

    /// A Huffman code of `n` bits, high bit first.
    fn code(&mut self, code: u32, n: u32) {
        for i in (0..n).rev() {
            self.put((code >> i) & 1, 1);
        }
    }

    fn bytes(self) -> Vec<u8> {
        self.out
    }
}

/// A one-page PDF whose content stream object (number 4) is `contents`, whole.
fn with_contents(label: &str, contents: &[u8]) -> Vec<u8> {
    let objects: [Vec<u8>; 4] = [
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 298 420] /Resources << >> /Contents 4 0 R >>"
            .to_vec(),
        contents.to_vec(),
    ];
    let mut out = format!("%PDF-1.4\n% {label}\n").into_bytes();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}
