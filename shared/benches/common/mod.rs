//! What the micro benchmarks share: where their side results go, and generated notebooks
//! imported through the real import path, built once and cached under the target directory.
#![allow(dead_code)]

use nib::domain::UserId;
use nib::services::{LocalOptions, Services};
use std::path::{Path, PathBuf};

/// Bump when the generator or the stored format changes, so cached notebooks are rebuilt.
const STORE_VERSION: u32 = 1;

/// Where benches write their side results (read by `bench/report.py`): `$NIB_BENCH_OUT`, or
/// `nib-bench/` in cargo's scratch folder under the target directory.
pub fn out_dir() -> PathBuf {
    let dir = std::env::var_os("NIB_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nib-bench"));
    std::fs::create_dir_all(&dir).expect("create the bench output folder");
    dir
}

pub fn write_json(name: &str, value: &serde_json::Value) {
    let path = out_dir().join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).expect("json")).expect("write json");
    eprintln!("wrote {}", path.display());
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

pub fn user() -> UserId {
    UserId::parse("default").expect("valid user")
}

/// A data directory holding `pages` generated pages (seed [`nib_bench::SEED`]), imported one by
/// one through `Notebook::import_files` like `nib import` does. Built once into
/// `{CARGO_TARGET_TMPDIR}/nib-bench-stores/` and reused by later runs (a `complete` marker says
/// the build finished); delete that folder to rebuild.
///
/// Every commit of the embedded store is fsynced, which makes a 100k-page import take many
/// minutes on a slow disk; so the notebook is built in `/dev/shm` (memory, where an fsync costs
/// nothing) when there is one, and copied to the target directory when complete. Pages are
/// imported one at a time: concurrent imports of one user conflict on the index statistics item
/// (see bench/findings.md, "Import"), so they would only retry.
pub fn notebook(rt: &tokio::runtime::Runtime, pages: usize) -> Services {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nib-bench-stores");
    // The model's id too: a store's vectors are only searched by the model that wrote them.
    let model = nib::embed::model().expect("the embedding model").id();
    let name = format!("pages-{pages}-v{STORE_VERSION}-{model}");
    let dir = root.join(&name);
    if !dir.join("complete").exists() {
        let shm = PathBuf::from("/dev/shm");
        let scratch = if shm.is_dir() { shm } else { root.clone() }
            .join(format!("nib-bench-build-{}", std::process::id()));
        let (source, build) = (scratch.join("pages"), scratch.join(&name));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&source).expect("create the page folder");
        nib_bench::write_notebook(&source, pages, nib_bench::SEED).expect("write pages");
        let started = std::time::Instant::now();
        eprintln!(
            "building a {pages}-page notebook in {} (once)",
            build.display()
        );
        let app = Services::open_local(&build, LocalOptions::default()).expect("open");
        let user = user();
        rt.block_on(async {
            app.ensure_user(&user).await.expect("user");
            let (files, _) = nib::notebook::group_dir(&source).expect("read pages");
            for (done, f) in files.iter().enumerate() {
                if let Err(e) = app.notebook().import_files(&user, f).await {
                    panic!("generated page {} does not import: {e}", f.stem);
                }
                if done % 10_000 == 9_999 {
                    eprintln!("  {} pages", done + 1);
                }
            }
        });
        drop(app);
        eprintln!(
            "built {pages} pages in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        let _ = std::fs::remove_dir_all(&dir);
        copy_dir(&build, &dir).expect("copy the notebook into the target directory");
        std::fs::write(dir.join("complete"), b"").expect("mark the notebook complete");
        let _ = std::fs::remove_dir_all(&scratch);
    }
    Services::open_local(&dir, LocalOptions::default()).expect("open the cached notebook")
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// The `p` quantile (0..=1) of sorted durations, in milliseconds.
pub fn quantile_ms(sorted: &[std::time::Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}
