//! The picture's rules that live in the crate graph (ARCHITECTURE.md, "The crates"), checked
//! with `cargo tree` on the workspace: the Lambda functions link no embedded store, the domain
//! and the ports link no I/O crate.

use std::path::Path;
use std::process::Command;

const FUNCTIONS: [&str; 6] = [
    "nib-fn-mcp",
    "nib-fn-pages",
    "nib-fn-tasks",
    "nib-fn-ingest",
    "nib-fn-oauth",
    "nib-fn-account",
];

/// The crates `package` links in a build of its own (normal dependencies, features as that
/// package asks for them), by name.
fn linked(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new(cargo)
        .current_dir(root)
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["-p", package])
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn links(crates: &[String], name: &str) -> bool {
    crates.iter().any(|c| c == name)
}

#[test]
fn no_lambda_function_links_the_embedded_store() {
    // The local binary does: the check below looks at the right names.
    let cli = linked("nib-cli");
    assert!(
        links(&cli, "redb") && links(&cli, "nib-embedded"),
        "{cli:?}"
    );
    for function in FUNCTIONS {
        let crates = linked(function);
        assert!(links(&crates, "nib-shared"), "{function}: {crates:?}");
        for forbidden in ["redb", "nib-embedded"] {
            assert!(!links(&crates, forbidden), "{function} links {forbidden}");
        }
    }
}

#[test]
fn the_domain_and_the_ports_link_no_io_crate() {
    for (package, allowed_nib) in [
        ("nib-domain", &["nib-domain"][..]),
        ("nib-ports", &["nib-domain", "nib-ocr", "nib-ports"][..]),
    ] {
        let crates = linked(package);
        for name in &crates {
            assert!(
                !name.starts_with("nib-") || allowed_nib.contains(&name.as_str()),
                "{package} links {name}"
            );
        }
        for io in [
            "tokio",
            "redb",
            "reqwest",
            "hyper",
            "aws-config",
            "ort",
            "hayro",
        ] {
            assert!(!links(&crates, io), "{package} links {io}");
        }
    }
}
