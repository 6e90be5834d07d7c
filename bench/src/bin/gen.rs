//! `nib-bench-gen DIR COUNT [SEED]`: writes COUNT generated markdown pages into DIR (created if
//! missing), the same pages for the same seed.

use anyhow::Context;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: nib-bench-gen DIR COUNT [SEED]";
    let dir = std::path::PathBuf::from(args.next().context(usage)?);
    let count: usize = args.next().context(usage)?.parse().context(usage)?;
    let seed = match args.next() {
        Some(s) => s.parse().context(usage)?,
        None => nib_bench::SEED,
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    nib_bench::write_notebook(&dir, count, seed)
        .with_context(|| format!("cannot write pages into {}", dir.display()))?;
    println!("wrote {count} pages into {}", dir.display());
    Ok(())
}
