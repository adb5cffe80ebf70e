//! Compiles the C tc-BPF programs in `bpf/` with `clang -target bpf` into OUT_DIR, where
//! `src/bpf.rs` embeds them. Without clang (setup not run) the objects are left empty and the
//! loader reports that cause at run time, so the rest of the workspace still builds.

use std::path::PathBuf;
use std::process::Command;

const PROGRAMS: &[&str] = &["token_bucket", "pqp", "bcpqp", "fair_policer", "pqp_flows", "pqp_class_flows"];

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../bpf");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed={}", root.display());
    println!("cargo:rerun-if-env-changed=RATEKIT_CLANG");
    let clang = std::env::var("RATEKIT_CLANG").unwrap_or_else(|_| "clang".into());
    let arch_include = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    for name in PROGRAMS {
        let src = root.join(format!("{name}.c"));
        let obj = out.join(format!("{name}.bpf.o"));
        let status = Command::new(&clang)
            .args(["-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror", "-Wno-unused-function"])
            .arg(format!("-I{arch_include}"))
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("clang failed on {} ({s})", src.display()),
            Err(e) => {
                println!("cargo:warning=BPF programs not built ({clang}: {e}); run scripts/setup.sh");
                std::fs::write(&obj, b"").unwrap();
            }
        }
    }
}
