//! Small real PDFs for tests that need a page's ink but not its look: nib refuses a "PDF" that
//! does not parse (`notebook::read_page_with`), so placeholder bytes after `%PDF-` no longer
//! pass for ink.

/// A one-page PDF (a blank A6 page) that parses, with `label` in a comment so that two
/// labels give two different files (a first and a second scan of a page). `label` is one line.
pub fn one_page(label: &str) -> Vec<u8> {
    assert!(!label.contains(['\r', '\n']), "one line");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 298 420] /Resources << >> /Contents 4 0 R >>"
            .to_owned(),
        "<< /Length 0 >>\nstream\n\nendstream".to_owned(),
    ];
    let mut out = format!("%PDF-1.4\n% {label}\n").into_bytes();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
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
