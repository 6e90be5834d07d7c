//! `nib export` and `nib import --bundle` through the binary (issue 14). The round trip itself,
//! every read compared, is tested over both back ends in `testkit/tests/library/bundle.rs`.

use std::path::Path;
use std::process::{Command, Output};

use crate::helpers::nib_exe;

fn nib(data: &Path, args: &[&std::ffi::OsStr]) -> Output {
    Command::new(nib_exe())
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

#[test]
fn export_then_import_bundle_gives_the_same_notebook_and_refuses_a_damaged_one() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/sample");
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let files = tempfile::tempdir().unwrap();
    let bundle = files.path().join("notebook.zip");
    let out = ok(&nib(
        a.path(),
        &[os("import"), sample.as_os_str(), os("--ocr"), os("off")],
    ));
    let pages: u32 = out
        .split("imported ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(pages > 5);
    let out = ok(&nib(a.path(), &[os("export"), bundle.as_os_str()]));
    assert!(out.contains(&format!("exported {pages} pages")), "{out}");
    assert!(!files.path().join("notebook.zip.partial").exists());

    let out = ok(&nib(
        b.path(),
        &[os("import"), os("--bundle"), bundle.as_os_str()],
    ));
    assert!(out.contains(&format!("imported {pages} pages")), "{out}");
    let out = ok(&nib(
        b.path(),
        &[os("import"), os("--bundle"), bundle.as_os_str()],
    ));
    assert!(
        out.contains("imported 0 pages and 0 tasks") && out.contains(&format!("{pages} pages and")),
        "a second import changes nothing: {out}"
    );

    // The Markdown export of both notebooks is the same, byte for byte.
    let markdown = |data: &Path, name: &str| {
        let path = files.path().join(name);
        ok(&nib(
            data,
            &[
                os("export"),
                os("--format"),
                os("markdown"),
                path.as_os_str(),
            ],
        ));
        std::fs::read(path).unwrap()
    };
    let (from, to) = (markdown(a.path(), "a.zip"), markdown(b.path(), "b.zip"));
    assert!(from.len() > 1000);
    assert_eq!(from, to);

    // A damaged bundle: refused with a clear error, nothing written.
    let mut bytes = std::fs::read(&bundle).unwrap();
    bytes.truncate(bytes.len() - 200);
    let damaged = files.path().join("damaged.zip");
    std::fs::write(&damaged, bytes).unwrap();
    let out = nib(
        c.path(),
        &[os("import"), os("--bundle"), damaged.as_os_str()],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot import") && stderr.contains("the bundle is damaged"),
        "{stderr}"
    );
    let empty = markdown(c.path(), "c.zip");
    let out = ok(&nib(
        c.path(),
        &[os("export"), files.path().join("c2.zip").as_os_str()],
    ));
    assert!(out.contains("exported 0 pages, 0 tasks"), "{out}");
    assert!(empty.len() < 100, "an empty archive");
}
