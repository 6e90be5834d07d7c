//! Operating a deployment: every admin command of `nib` over the AWS back end (moto, provisioned
//! like infra/), the settings read from Terraform's outputs, and the first owner at deploy time.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use nib::adapters::aws::AwsClients;
use nib::config::AwsConfig;
use nib::domain::UserId;
use nib::services::Services;

use crate::helpers::{emulator, nib_exe, sample_dir};

/// `nib --backend aws` over the table, bucket and key of `config`, with no data directory
/// that could be used by mistake (it is an empty temporary one, checked afterwards).
pub(crate) fn nib_aws(config: &AwsConfig, data: &Path) -> Command {
    let mut c = Command::new(nib_exe());
    c.arg("--data-dir")
        .arg(data)
        .arg("--backend")
        .arg("aws")
        .env("NIB_TABLE", &config.table)
        .env("NIB_BUCKET", &config.bucket)
        .env("NIB_KMS_KEY_ID", &config.kms_key_id)
        .env("NIB_PUBLIC_URL", "https://nib.example.com")
        .env("AWS_ENDPOINT_URL", config.endpoint_url.as_ref().unwrap())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env_remove("NIB_BACKEND")
        .env_remove("NIB_TERRAFORM_DIR")
        .env_remove("AWS_PROFILE");
    c
}

/// Runs `cmd` with `stdin` (nothing: a closed stdin, no terminal); (success, stdout, stderr).
async fn run(mut cmd: Command, stdin: Option<&str>) -> (bool, String, String) {
    let stdin = stdin.map(str::to_owned);
    tokio::task::spawn_blocking(move || {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut pipe = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            pipe.write_all(s.as_bytes()).unwrap();
        }
        drop(pipe);
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

fn args(mut cmd: Command, a: &[&str]) -> Command {
    cmd.args(a);
    cmd
}

fn default_user() -> UserId {
    UserId::parse("default").unwrap()
}

/// A folder of three pages: two of text, one of ink with its OCR text.
fn pages_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "2026-06-16.md",
        "2026-06-17.md",
        "2026-06-18.png",
        "2026-06-18.txt",
    ] {
        std::fs::copy(sample_dir().join(name), dir.path().join(name)).unwrap();
    }
    dir
}

#[tokio::test]
async fn the_admin_commands_work_on_the_aws_back_end() {
    let config = emulator().await.fresh().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let nib = |a: &[&str]| args(nib_aws(&config, data.path()), a);

    // Users: create, then the password checks on the deployed table; passwd changes it.
    let (ok, out, err) = run(
        nib(&["user", "create", "alice", "--password-stdin"]),
        Some("first secret\n"),
    )
    .await;
    assert!(ok, "{out}{err}");
    let app = Services::open_aws(config.clone()).await.unwrap();
    let alice = UserId::parse("alice").unwrap();
    assert_eq!(
        app.users().check("alice", "first secret").await.unwrap(),
        Some(alice.clone())
    );
    // Signed in on two browsers; the password change ends both sessions.
    let sessions = app.web_sessions();
    let browsers = [
        sessions.create(&alice).await.unwrap(),
        sessions.create(&alice).await.unwrap(),
    ];
    let (ok, out, err) = run(
        nib(&["user", "passwd", "alice", "--password-stdin"]),
        Some("second secret\n"),
    )
    .await;
    assert!(ok, "{out}{err}");
    for browser in &browsers {
        assert_eq!(sessions.check(&browser.id).await.unwrap(), None);
    }
    assert_eq!(
        app.users().check("alice", "first secret").await.unwrap(),
        None
    );
    assert_eq!(
        app.users().check("alice", "second secret").await.unwrap(),
        Some(alice.clone())
    );

    // Tokens: one created by the CLI is in the table (a server over it accepts it), listed
    // without its secret, then revoked.
    let (ok, token, err) = run(
        nib(&[
            "token", "create", "--scope", "read", "--label", "ops", "--user", "alice",
        ]),
        None,
    )
    .await;
    assert!(ok, "{err}");
    let token = token.trim().to_owned();
    assert!(
        app.tokens.verify(&token).await.is_ok(),
        "the table knows the token"
    );
    let (ok, listing, _) = run(nib(&["token", "list", "--user", "alice"]), None).await;
    assert!(
        ok && listing.contains("ops") && listing.contains("active"),
        "{listing}"
    );
    assert!(!listing.contains(&token));
    let id = listing
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let (ok, out, err) = run(nib(&["token", "revoke", &id, "--user", "alice"]), None).await;
    assert!(ok && out.contains("revoked"), "{out}{err}");
    assert!(
        app.tokens.verify(&token).await.is_err(),
        "revoked in the table"
    );

    // Clients: added, listed, removed.
    let (ok, client_id, err) = run(
        nib(&[
            "client",
            "add",
            "--name",
            "Ops app",
            "--redirect-uri",
            "https://ops.example.com/cb",
        ]),
        None,
    )
    .await;
    assert!(ok, "{err}");
    let client_id = client_id.trim().to_owned();
    let (ok, listing, _) = run(nib(&["client", "list"]), None).await;
    assert!(
        ok && listing.contains(&client_id) && listing.contains("Ops app"),
        "{listing}"
    );
    let (ok, _, err) = run(nib(&["client", "remove", &client_id]), None).await;
    assert!(ok, "{err}");
    let (_, listing, _) = run(nib(&["client", "list"]), None).await;
    assert!(!listing.contains(&client_id), "{listing}");

    // Grants: none yet; revoking one that is not there says so and fails.
    let (ok, listing, _) = run(nib(&["grant", "list", "--user", "alice"]), None).await;
    assert!(ok && listing.starts_with("ID"), "{listing}");
    let (ok, _, err) = run(nib(&["grant", "revoke", "nope", "--user", "alice"]), None).await;
    assert!(!ok && err.contains("has no grant"), "{err}");

    // Nothing went to the local data directory.
    assert_eq!(std::fs::read_dir(data.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn import_writes_pages_to_the_table_and_bucket_and_again_changes_nothing() {
    let config = emulator().await.fresh().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let folder = pages_dir();
    let import = || {
        let mut c = nib_aws(&config, data.path());
        c.arg("import").arg(folder.path()).args(["--ocr", "off"]);
        c
    };
    let (ok, out, err) = run(import(), None).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("imported 3 pages (3 new, 0 updated)"), "{out}");
    let app = Services::open_aws(config.clone()).await.unwrap();
    let user = default_user();
    let (pages, _) = app
        .notebook()
        .list_pages_after(&user, None, None, None, 10)
        .await
        .unwrap();
    assert_eq!(pages.len(), 3);
    // The ink is in the bucket, sealed: the notebook reads it back.
    let ink = app
        .notebook()
        .page_of_stem(&user, "2026-06-18")
        .await
        .unwrap()
        .unwrap();
    let png = app
        .assets
        .get(&user, &ink, nib::ports::AssetKind::Png)
        .await
        .unwrap()
        .expect("the page image is in S3");
    assert!(!png.is_empty());
    // Again: the same pages, none new.
    let (ok, out, err) = run(import(), None).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("(0 new, 3 updated)"), "{out}");
    let (pages, _) = app
        .notebook()
        .list_pages_after(&user, None, None, None, 10)
        .await
        .unwrap();
    assert_eq!(pages.len(), 3);
}

#[tokio::test]
async fn import_via_upload_puts_the_files_under_uploads_and_needs_aws() {
    let config = emulator().await.fresh().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let folder = pages_dir();
    let mut c = nib_aws(&config, data.path());
    c.arg("import")
        .arg(folder.path())
        .args(["--via-upload", "--user", "alice"]);
    let (ok, out, err) = run(c, None).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("uploaded 3 pages"), "{out}");
    let clients = AwsClients::connect(&config).await;
    let listed = clients
        .s3
        .list_objects_v2()
        .bucket(&config.bucket)
        .prefix("uploads/")
        .send()
        .await
        .unwrap();
    let mut keys: Vec<String> = listed
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "uploads/alice/2026-06-16.md",
            "uploads/alice/2026-06-17.md",
            "uploads/alice/2026-06-18.png",
            "uploads/alice/2026-06-18.txt",
        ]
    );
    // No page was written here: the ingest function does that.
    let app = Services::open_aws(config.clone()).await.unwrap();
    assert!(app.store.get("U#alice", "USER").await.unwrap().is_none());
    // Locally there is no bucket: it says so.
    let mut c = Command::new(nib_exe());
    c.arg("--data-dir")
        .arg(data.path())
        .env_remove("NIB_BACKEND")
        .arg("import")
        .arg(folder.path())
        .arg("--via-upload");
    let (ok, _, err) = run(c, None).await;
    assert!(!ok && err.contains("needs --backend aws"), "{err}");
}

/// A `terraform` on PATH that prints `json` for `output -json` (and checks it was asked for
/// the right directory); the tests cannot download Terraform's providers.
fn fake_terraform(json: &str, dir: &Path) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    let out = bin.path().join("output.json");
    std::fs::write(&out, json).unwrap();
    let script = bin.path().join("terraform");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n[ \"$1\" = \"-chdir={}\" ] && [ \"$2\" = output ] && [ \"$3\" = -json ] || {{ echo \"unexpected: $*\" >&2; exit 1; }}\ncat '{}'\n",
            dir.display(),
            out.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn terraform_outputs(config: &AwsConfig, public_url: &str) -> String {
    let s = |v: &str| serde_json::json!({ "sensitive": false, "type": "string", "value": v });
    serde_json::json!({
        "table_name": s(&config.table),
        "bucket_name": s(&config.bucket),
        "data_key_arn": s(&config.kms_key_id),
        "region": s("us-east-1"),
        "public_url": s(public_url),
        "connector_url": s(&format!("{public_url}/mcp")),
    })
    .to_string()
}

#[tokio::test]
async fn from_terraform_reads_the_settings_from_terraforms_outputs() {
    let config = emulator().await.fresh().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let infra = tempfile::tempdir().unwrap();
    let bin = fake_terraform(
        &terraform_outputs(&config, "https://tf.example.com"),
        infra.path(),
    );
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // No NIB_TABLE & co. in the environment: all from Terraform (credentials and the emulator's
    // endpoint stay the environment's).
    let mut c = Command::new(nib_exe());
    c.arg("--data-dir")
        .arg(data.path())
        .arg(format!("--from-terraform={}", infra.path().display()))
        .args(["user", "ensure-owner"])
        .env("PATH", &path)
        .env("AWS_ENDPOINT_URL", config.endpoint_url.as_ref().unwrap())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env_remove("AWS_REGION")
        .env_remove("AWS_PROFILE")
        .env_remove("NIB_BACKEND")
        .env_remove("NIB_PUBLIC_URL");
    for v in ["NIB_TABLE", "NIB_BUCKET", "NIB_KMS_KEY_ID"] {
        c.env_remove(v);
    }
    let (ok, out, err) = run(c, None).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("connector URL: https://tf.example.com/mcp"),
        "{out}"
    );
    let app = Services::open_aws(config.clone()).await.unwrap();
    assert!(
        app.users().has_password(&default_user()).await.unwrap(),
        "the owner is in the table Terraform named"
    );
    assert_eq!(std::fs::read_dir(data.path()).unwrap().count(), 0);

    // `--from-terraform` alone, before the command, reads ./infra (and takes no command for
    // its folder): the owner is there already.
    let work = tempfile::tempdir().unwrap();
    let bare = fake_terraform(
        &terraform_outputs(&config, "https://tf.example.com"),
        Path::new("infra"),
    );
    let mut c = nib_aws(&config, data.path());
    c.current_dir(work.path())
        .args(["--from-terraform", "user", "ensure-owner"])
        .env(
            "PATH",
            format!(
                "{}:{}",
                bare.path().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
    for v in [
        "NIB_TABLE",
        "NIB_BUCKET",
        "NIB_KMS_KEY_ID",
        "NIB_PUBLIC_URL",
    ] {
        c.env_remove(v);
    }
    let (ok, out, err) = run(c, None).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("nothing changed") && out.contains("https://tf.example.com/mcp"),
        "{out}"
    );

    // A directory Terraform has nothing for: the error says what to do.
    let empty = fake_terraform("{}", infra.path());
    let mut c = nib_aws(&config, data.path());
    c.arg(format!("--from-terraform={}", infra.path().display()))
        .args(["token", "list"])
        .env(
            "PATH",
            format!(
                "{}:{}",
                empty.path().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
    let (ok, _, err) = run(c, None).await;
    assert!(!ok && err.contains("make deploy"), "{err}");
}

#[tokio::test]
async fn ensure_owner_creates_the_owner_once_and_prints_where_to_connect() {
    let config = emulator().await.fresh().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let nib = |a: &[&str]| args(nib_aws(&config, data.path()), a);
    // No terminal, no --password-stdin: a password is generated and printed once.
    let (ok, out, err) = run(nib(&["user", "ensure-owner"]), None).await;
    assert!(ok, "{out}{err}");
    let password = out
        .lines()
        .find_map(|l| l.split_once("(shown only this once): "))
        .map(|(_, p)| p.trim().to_owned())
        .unwrap_or_else(|| panic!("no password in {out}"));
    assert!(
        out.contains("connector URL: https://nib.example.com/mcp"),
        "{out}"
    );
    assert!(out.contains("Claude") && out.contains("ChatGPT"), "{out}");
    let app = Services::open_aws(config.clone()).await.unwrap();
    assert_eq!(
        app.users().check("default", &password).await.unwrap(),
        Some(default_user())
    );
    // Again (and with a password given): nothing changes, nothing secret printed.
    let (ok, again, err) = run(
        nib(&["user", "ensure-owner", "--password-stdin"]),
        Some("other\n"),
    )
    .await;
    assert!(ok, "{again}{err}");
    assert!(
        again.contains("nothing changed") && !again.contains(&password),
        "{again}"
    );
    assert_eq!(
        app.users().check("default", &password).await.unwrap(),
        Some(default_user())
    );
    assert_eq!(app.users().check("default", "other").await.unwrap(), None);
}

/// `nib serve --backend aws` over `config` on a free port; killed on drop. Its base URL.
struct AwsServer {
    child: std::process::Child,
    base: String,
    _stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Drop for AwsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn serve_aws(config: &AwsConfig, data: &Path) -> AwsServer {
    use std::io::BufRead;
    let mut cmd = nib_aws(config, data);
    cmd.env_remove("NIB_PUBLIC_URL")
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let base = line
            .trim()
            .strip_prefix("nib: serving ")
            .and_then(|u| u.strip_suffix("/mcp"))
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        AwsServer {
            child,
            base,
            _stdout: out,
        }
    })
    .await
    .unwrap()
}

fn failing_lines(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.contains(": FAIL: ")).collect()
}

#[tokio::test]
async fn doctor_passes_a_sound_deployment_and_names_what_is_broken() {
    let emulator = emulator().await;
    let config = emulator.fresh().await.unwrap();
    let clients = AwsClients::connect(&config).await;
    nib_testkit::emulator::provision_bucket_like_infra(
        &clients.s3,
        &config.bucket,
        &config.kms_key_id,
        "arn:aws:lambda:us-east-1:123456789012:function:nib-ingest",
    )
    .await
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = serve_aws(&config, data.path()).await;
    let doctor = |config: &AwsConfig| {
        let mut c = nib_aws(config, data.path());
        c.env("NIB_PUBLIC_URL", &server.base).arg("doctor");
        c
    };
    let (ok, out, err) = run(doctor(&config), None).await;
    assert!(ok, "{out}{err}");
    assert_eq!(failing_lines(&out), Vec::<&str>::new(), "{out}");
    for check in [
        "table keys and index: ok",
        "table TTL on expires_at: ok",
        "bucket public-access block: ok",
        "bucket encryption: ok",
        "bucket upload notification: ok",
        "data key usable (GenerateDataKey): ok",
        "table round trip (write, read, delete): ok",
        "a user can sign in (user index): ok",
        "connector answers 401 with resource_metadata: ok",
        "well-known documents and issuer: ok",
        "a temporary read token lists the tools: ok",
    ] {
        assert!(out.contains(check), "{check} missing in\n{out}");
    }
    // The temporary token was revoked; the probe item is gone.
    let app = Services::open_aws(config.clone()).await.unwrap();
    let probe = UserId::parse(nib::doctor::PROBE_USER).unwrap();
    let tokens = app.tokens.list(&probe).await.unwrap();
    assert_eq!(tokens.len(), 1);
    assert!(tokens[0].revoked_at.is_some());
    assert!(
        app.store
            .get("U#nib-doctor-probe", "DOCTOR#probe")
            .await
            .unwrap()
            .is_none()
    );

    // A bucket without its public-access block: named, with the fix, exit code 1.
    clients
        .s3
        .delete_public_access_block()
        .bucket(&config.bucket)
        .send()
        .await
        .unwrap();
    let (ok, out, _) = run(doctor(&config), None).await;
    assert!(!ok, "{out}");
    let failing = failing_lines(&out);
    assert_eq!(failing.len(), 1, "{out}");
    assert!(
        failing[0].starts_with("bucket public-access block: FAIL: ")
            && failing[0].contains("-> block all public access"),
        "{out}"
    );

    // A table that is not there: its checks fail, saying which table.
    let mut missing = config.clone();
    missing.table = "nib-no-such-table".into();
    let (ok, out, _) = run(doctor(&missing), None).await;
    assert!(!ok, "{out}");
    let table_line = out
        .lines()
        .find(|l| l.starts_with("table keys and index: "))
        .unwrap();
    assert!(
        table_line.contains("FAIL: cannot describe the table nib-no-such-table"),
        "{out}"
    );
    assert!(
        out.contains("table round trip (write, read, delete): FAIL"),
        "{out}"
    );
}

#[tokio::test]
async fn doctor_says_it_needs_a_deployment() {
    let data = tempfile::tempdir().unwrap();
    let mut c = Command::new(nib_exe());
    c.arg("--data-dir")
        .arg(data.path())
        .env_remove("NIB_BACKEND")
        .env_remove("NIB_TERRAFORM_DIR")
        .arg("doctor");
    let (ok, _, err) = run(c, None).await;
    assert!(!ok && err.contains("needs --backend aws"), "{err}");
}

fn nib_local(data: &Path) -> Command {
    let mut c = Command::new(nib_exe());
    c.arg("--data-dir")
        .arg(data)
        .env_remove("NIB_BACKEND")
        .env_remove("NIB_TERRAFORM_DIR")
        .env_remove("NIB_SMOKE_TOKEN");
    c
}

#[tokio::test]
async fn smoke_checks_a_live_connector_and_names_what_fails() {
    use std::io::BufRead;
    let data = tempfile::tempdir().unwrap();
    let mut c = nib_local(data.path());
    c.arg("import").arg(sample_dir()).args(["--ocr", "off"]);
    let _ = run(c, None).await; // the sample has one undated file: a failure we do not need
    let mut c = nib_local(data.path());
    c.args(["token", "create", "--scope", "read"]);
    let (ok, token, err) = run(c, None).await;
    assert!(ok, "{err}");
    let token = token.trim().to_owned();
    let mut cmd = nib_local(data.path());
    cmd.args(["serve", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let server = tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("nib: serving ")
            .unwrap()
            .to_owned();
        AwsServer {
            child,
            base: url,
            _stdout: out,
        }
    })
    .await
    .unwrap();
    let mcp = server.base.clone();
    let smoke = |token: Option<&str>| {
        let mut c = nib_local(data.path());
        c.args(["smoke", &mcp]);
        if let Some(t) = token {
            c.args(["--token", t]);
        }
        c
    };
    let (ok, out, err) = run(smoke(Some(&token)), None).await;
    assert!(ok, "{out}{err}");
    for check in [
        "OAuth metadata chain: ok",
        "initialize 2025-03-26: ok",
        "initialize 2025-06-18: ok",
        "initialize 2025-11-25: ok",
        "server/discover 2026-07-28: ok",
        "tools/list: ok",
        "list_pages: ok",
        "get_page: ok",
        "signed page image (200, then 403 tampered): ok",
        "search_pages: ok",
    ] {
        assert!(out.contains(check), "{check} missing in\n{out}");
    }
    assert!(failing_lines(&out).is_empty(), "{out}");
    // Without a token: the anonymous part only, and it says so.
    let (ok, out, _) = run(smoke(None), None).await;
    assert!(
        ok && out.contains("OAuth metadata chain: ok") && out.contains("no --token"),
        "{out}"
    );
    // A token that is not one: the tools fail, by name, exit code 1.
    let (ok, out, _) = run(smoke(Some("nib_live_notatoken")), None).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("tools/list: FAIL: ") && out.contains("list_pages: FAIL: "),
        "{out}"
    );
    assert!(out.contains("OAuth metadata chain: ok"), "{out}");
    drop(server);
}

/// `nib user list` and `nib user delete` through the binary, on one back end: the list's
/// lines, and what the deletion and its refusals print.
async fn user_commands(nib: impl Fn(&[&str]) -> Command) -> Vec<String> {
    let folder = pages_dir();
    let mut transcript = Vec::new();
    let (ok, out, err) = run(
        nib(&["import", folder.path().to_str().unwrap(), "--ocr", "off"]),
        None,
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run(
        nib(&["user", "ensure-owner", "--password-stdin"]),
        Some("owner secret\n"),
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run(
        nib(&["user", "create", "alice", "--password-stdin"]),
        Some("alice secret\n"),
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, _, err) = run(
        nib(&["token", "create", "--scope", "read", "--user", "alice"]),
        None,
    )
    .await;
    assert!(ok, "{err}");
    let (ok, list, err) = run(nib(&["user", "list"]), None).await;
    assert!(ok, "{err}");
    transcript.push(list);

    // Not confirmed, unknown: refused, nothing deleted.
    let (ok, _, err) = run(nib(&["user", "delete", "default"]), Some("alice\n")).await;
    assert!(
        !ok && err.contains("not confirmed: nothing deleted"),
        "{err}"
    );
    let (ok, _, err) = run(nib(&["user", "delete", "ghost", "--yes"]), None).await;
    assert!(!ok && err.contains("there is no user ghost"), "{err}");
    let (ok, list, _) = run(nib(&["user", "list"]), None).await;
    assert!(ok && list == transcript[0], "{list}");

    // Confirmed by typing the name: gone from the list, its password no longer works.
    let (ok, out, err) = run(nib(&["user", "delete", "default"]), Some("default\n")).await;
    assert!(ok, "{out}{err}");
    assert!(err.contains("default: destroyed the data key"), "{err}");
    transcript.push(out);
    let (ok, list, _) = run(nib(&["user", "list"]), None).await;
    assert!(ok, "{list}");
    transcript.push(list);
    let (ok, _, err) = run(nib(&["user", "delete", "default", "--yes"]), None).await;
    assert!(!ok && err.contains("there is no user default"), "{err}");
    transcript
}

#[tokio::test]
async fn user_list_and_delete_print_the_same_on_both_back_ends() {
    let config = emulator().await.fresh().await.unwrap();
    let aws_data = tempfile::tempdir().unwrap();
    let aws = user_commands(|a| args(nib_aws(&config, aws_data.path()), a)).await;
    let local_data = tempfile::tempdir().unwrap();
    let local = user_commands(|a| args(nib_local(local_data.path()), a)).await;
    // The deletion's item count depends on how the pages' (random) ids fall into the vector
    // blocks (`VEC#nn`, chosen by page id: three pages make two or three block items), so it is
    // compared as a range; every other line must be the same.
    let items = |line: &str| -> (String, u64) {
        let (head, tail) = line.rsplit_once(", ").expect("a count of items");
        let n = tail.trim_end().trim_end_matches(" items").parse().unwrap();
        (head.to_owned(), n)
    };
    let (aws_head, aws_items) = items(&aws[1]);
    let (local_head, local_items) = items(&local[1]);
    assert_eq!(aws_head, local_head);
    assert!(
        aws_items.abs_diff(local_items) <= 2,
        "{aws_items} {local_items}"
    );
    assert_eq!((&aws[0], &aws[2]), (&local[0], &local[2]));
    assert_eq!(aws.len(), local.len());

    let today = time::OffsetDateTime::now_utc().date().to_string();
    let list: Vec<Vec<&str>> = local[0]
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        list,
        [
            vec![
                "USER", "CREATED", "OWNER", "PASSWORD", "PAGES", "TOKENS", "GRANTS"
            ],
            vec!["alice", &today, "no", "yes", "0", "1", "0"],
            vec!["default", &today, "yes", "yes", "3", "0", "0"],
        ]
    );
    assert!(
        local[1].starts_with("deleted user default: 1 credentials, 1 page images, 1 data keys"),
        "{}",
        local[1]
    );
    assert_eq!(local[2].lines().count(), 2, "{}", local[2]);
    assert!(local[2].lines().nth(1).unwrap().starts_with("alice "));
    // Nothing went to the local data directory on AWS.
    assert_eq!(std::fs::read_dir(aws_data.path()).unwrap().count(), 0);
}

/// `nib user timezone` and `nib notes add` through the binary on one back end: UTC until set,
/// a name that is not a zone refused with nothing changed, a zone kept as the database spells
/// it, and a note without a date written on today in that zone.
async fn time_zone_commands(nib: impl Fn(&[&str]) -> Command) {
    let (ok, out, err) = run(nib(&["user", "timezone", "default"]), None).await;
    assert!(ok && out == "UTC\n", "{out}{err}");
    let (ok, _, err) = run(
        nib(&["user", "timezone", "default", "Mars/Olympus_Mons"]),
        None,
    )
    .await;
    assert!(
        !ok && err.contains("\"Mars/Olympus_Mons\" is not a time zone"),
        "{err}"
    );
    let (ok, out, _) = run(nib(&["user", "timezone", "default"]), None).await;
    assert!(ok && out == "UTC\n", "unchanged: {out}");
    let (ok, out, err) = run(nib(&["user", "timezone", "default", "europe/berlin"]), None).await;
    assert!(ok && out == "Europe/Berlin\n", "{out}{err}");
    let zone = crate::notes::zone_off_utc_today();
    let (ok, out, err) = run(nib(&["user", "timezone", "default", zone]), None).await;
    assert!(ok && out == format!("{zone}\n"), "{out}{err}");
    let before = crate::notes::today_in(zone);
    let (ok, out, err) = run(nib(&["notes", "add", "Return the library books"]), None).await;
    let after = crate::notes::today_in(zone);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!("on the page of {before}"))
            || out.contains(&format!("on the page of {after}")),
        "not today in {zone} ({before}): {out}"
    );
}

#[tokio::test]
async fn user_timezone_is_kept_and_used_on_both_back_ends() {
    let config = emulator().await.fresh().await.unwrap();
    let aws_data = tempfile::tempdir().unwrap();
    time_zone_commands(|a| args(nib_aws(&config, aws_data.path()), a)).await;
    let local_data = tempfile::tempdir().unwrap();
    time_zone_commands(|a| args(nib_local(local_data.path()), a)).await;
}

/// The deploy rehearsal (issue 13): an account provisioned as infra/ would (the table with its
/// index and TTL, the bucket with its public-access block, encryption and upload
/// notification, a data key and a signing key), the functions under `cargo lambda watch`
/// behind the API Gateway stand-in, then only what an operator runs, every setting from
/// Terraform's outputs: `make deploy`'s `nib user ensure-owner`, an import and tokens; the
/// owner signs in through OAuth and calls tools through the functions; `nib doctor` and `nib
/// smoke` pass; and `doctor` names a broken TTL, then a bucket without its public-access
/// block, with exit code 1.
#[tokio::test]
async fn a_deploy_rehearsal_goes_from_an_empty_account_to_a_working_connector() {
    use crate::helpers::{Backend, TestApp};
    use crate::oauth::{Env, PASSWORD, connects_calls_a_tool_and_refreshes};
    use std::sync::Arc;

    // Provision as infra/ would.
    let emulator = emulator().await;
    let mut config = emulator.fresh().await.unwrap();
    let (key_id, public_pem) = emulator.create_signing_key().await.unwrap();
    config.signing_key_id = Some(key_id);
    config.signing_public_key_pem = Some(public_pem);
    let clients = AwsClients::connect(&config).await;
    nib_testkit::emulator::provision_bucket_like_infra(
        &clients.s3,
        &config.bucket,
        &config.kms_key_id,
        "arn:aws:lambda:us-east-1:123456789012:function:nib-ingest",
    )
    .await
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    config.public_url = Some(base.clone());
    let stack = Arc::new(
        crate::lambda::LambdaStack::start(
            &config,
            &base,
            nib::http::RateLimits::OFF,
            "textract",
            false,
        )
        .await,
    );
    tokio::spawn(crate::lambda::gateway(listener, stack.clone()));

    // The operator's commands, with the settings from `terraform output -json` only.
    let infra = tempfile::tempdir().unwrap();
    let bin = fake_terraform(&terraform_outputs(&config, &base), infra.path());
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let data = tempfile::tempdir().unwrap();
    let nib = |a: &[&str]| {
        let mut c = Command::new(nib_exe());
        c.arg("--data-dir")
            .arg(data.path())
            .arg(format!("--from-terraform={}", infra.path().display()))
            .args(a)
            .env("PATH", &path)
            .env("AWS_ENDPOINT_URL", config.endpoint_url.as_ref().unwrap())
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env_remove("AWS_REGION")
            .env_remove("AWS_PROFILE")
            .env_remove("NIB_BACKEND")
            .env_remove("NIB_PUBLIC_URL")
            .env_remove("NIB_SMOKE_TOKEN");
        for v in ["NIB_TABLE", "NIB_BUCKET", "NIB_KMS_KEY_ID"] {
            c.env_remove(v);
        }
        c
    };

    // `make deploy`'s bootstrap: the first owner, once.
    let owner = format!("{PASSWORD}\n");
    let (ok, out, err) = run(
        nib(&["user", "ensure-owner", "--password-stdin"]),
        Some(&owner),
    )
    .await;
    assert!(ok, "{out}{err}");
    assert!(out.contains(&format!("connector URL: {base}/mcp")), "{out}");
    let (ok, again, _) = run(
        nib(&["user", "ensure-owner", "--password-stdin"]),
        Some("another password\n"),
    )
    .await;
    assert!(ok && again.contains("nothing changed"), "{again}");
    let folder = pages_dir();
    let (ok, out, err) = run(
        nib(&["import", folder.path().to_str().unwrap(), "--ocr", "off"]),
        None,
    )
    .await;
    assert!(ok, "{out}{err}");
    let token = |scope: &str| {
        let c = nib(&["token", "create", "--scope", scope, "--label", "rehearsal"]);
        async move {
            let (ok, token, err) = run(c, None).await;
            assert!(ok, "{err}");
            token.trim().to_owned()
        }
    };
    let admin = token("admin").await;
    let read = token("read").await;
    let (ok, users, _) = run(nib(&["user", "list"]), None).await;
    let owner_line = users.lines().nth(1).unwrap_or_default();
    let fields: Vec<&str> = owner_line.split_whitespace().collect();
    assert!(
        ok && fields[0] == "default"
            && fields[2] == "yes"
            && fields[3] == "yes"
            && fields[4] == "3",
        "{users}"
    );

    // The owner signs in through OAuth and calls tools, through the functions.
    let app = TestApp {
        url: format!("{base}/mcp"),
        base: base.clone(),
        token: admin,
        app: Arc::new(
            Services::open_aws_admin(config.clone(), nib::config::OcrChoice::Off)
                .await
                .unwrap(),
        ),
        client: reqwest::Client::new(),
        dir: tempfile::tempdir().unwrap(),
        backend: Backend::Lambda,
        aws_config: Some(config.clone()),
        lambda: Some(stack),
    };
    let listed = app.call("list_pages", serde_json::json!({})).await;
    assert_eq!(
        listed["pages"].as_array().map(Vec::len),
        Some(3),
        "{listed}"
    );
    connects_calls_a_tool_and_refreshes(&Env::around(app)).await;

    // `nib doctor`: all ok.
    let (ok, out, err) = run(nib(&["doctor"]), None).await;
    assert!(ok, "{out}{err}");
    assert_eq!(failing_lines(&out), Vec::<&str>::new(), "{out}");
    assert!(out.lines().count() >= 10, "{out}");

    // `nib smoke` with the read token: every check ok but the tampered image URL, which
    // answers 200 because moto checks no presigned signature (real S3 answers 403; the
    // local smoke test checks it against nib's own signed URLs).
    let mcp = format!("{base}/mcp");
    let (_, out, err) = run(nib(&["smoke", &mcp, "--token", &read]), None).await;
    for check in [
        "OAuth metadata chain: ok",
        "initialize 2025-03-26: ok",
        "initialize 2025-06-18: ok",
        "initialize 2025-11-25: ok",
        "server/discover 2026-07-28: ok",
        "tools/list: ok",
        "list_pages: ok",
        "get_page: ok",
        "search_pages: ok",
    ] {
        assert!(out.contains(check), "{check} missing in\n{out}{err}");
    }
    assert_eq!(
        failing_lines(&out),
        [
            "signed page image (200, then 403 tampered): FAIL: a tampered image URL answered 200 OK, not 403 -> page images must be reachable only through signed URLs: block public access on the bucket"
        ],
        "{out}"
    );

    // Break one thing at a time: doctor names it, exit code 1.
    let ttl = |enabled: bool| {
        clients
            .dynamodb
            .update_time_to_live()
            .table_name(&config.table)
            .time_to_live_specification(
                aws_sdk_dynamodb::types::TimeToLiveSpecification::builder()
                    .enabled(enabled)
                    .attribute_name("expires_at")
                    .build()
                    .unwrap(),
            )
            .send()
    };
    ttl(false).await.unwrap();
    let (ok, out, _) = run(nib(&["doctor"]), None).await;
    assert!(!ok, "{out}");
    let failing = failing_lines(&out);
    assert_eq!(failing.len(), 1, "{out}");
    assert!(
        failing[0].starts_with("table TTL on expires_at: FAIL: "),
        "{out}"
    );
    ttl(true).await.unwrap();
    clients
        .s3
        .delete_public_access_block()
        .bucket(&config.bucket)
        .send()
        .await
        .unwrap();
    let (ok, out, _) = run(nib(&["doctor"]), None).await;
    assert!(!ok, "{out}");
    let failing = failing_lines(&out);
    assert_eq!(failing.len(), 1, "{out}");
    assert!(
        failing[0].starts_with("bucket public-access block: FAIL: "),
        "{out}"
    );
}

/// `nib export` (both formats) and `nib import --bundle` over the AWS back end: a bundle from
/// one table imports into another (again: nothing new), and the Markdown exports agree.
#[tokio::test]
async fn export_and_bundle_import_work_on_the_aws_back_end() {
    let a = emulator().await.fresh().await.unwrap();
    let b = emulator().await.fresh().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let folder = pages_dir();
    let (ok, out, err) = run(
        args(
            nib_aws(&a, data.path()),
            &["import", folder.path().to_str().unwrap(), "--ocr", "off"],
        ),
        None,
    )
    .await;
    assert!(ok, "{out}{err}");
    let bundle = files.path().join("notebook.zip");
    let bundle = bundle.to_str().unwrap();
    let (ok, out, err) = run(args(nib_aws(&a, data.path()), &["export", bundle]), None).await;
    assert!(ok && out.contains("exported 3 pages"), "{out}{err}");
    for expect in ["imported 3 pages", "imported 0 pages"] {
        let (ok, out, err) = run(
            args(nib_aws(&b, data.path()), &["import", "--bundle", bundle]),
            None,
        )
        .await;
        assert!(ok && out.contains(expect), "{expect}: {out}{err}");
    }
    let markdown = |config: &AwsConfig, name: &str| {
        let path = files.path().join(name);
        let c = args(
            nib_aws(config, data.path()),
            &["export", "--format", "markdown", path.to_str().unwrap()],
        );
        async move {
            let (ok, out, err) = run(c, None).await;
            assert!(ok, "{out}{err}");
            std::fs::read(path).unwrap()
        }
    };
    assert_eq!(markdown(&a, "a.zip").await, markdown(&b, "b.zip").await);
    assert_eq!(std::fs::read_dir(data.path()).unwrap().count(), 0);
}
