//! Where the CUDA compiler is: the project's own copy in `.cuda/` (installed from PyPI by
//! `cargo xtask setup-cuda`) or the user's toolkit.
//!
//! This file is also compiled into qforge-cuda's build script (`#[path]`), so it uses `std`
//! only.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The PyPI packages `cargo xtask setup-cuda` installs, all pinned to the CUDA 13.0 series
/// (the GPU machines' driver runs 13.0 PTX; a plain `nvidia-cuda-nvcc` install pulls a newer
/// `nvidia-nvvm`, whose PTX that driver may reject).
pub const PACKAGES: &[&str] = &[
    "nvidia-cuda-nvcc==13.0.*",
    "nvidia-cuda-runtime==13.0.*",
    "nvidia-cuda-crt==13.0.*",
    "nvidia-nvvm==13.0.*",
    "nvidia-cuda-cccl==13.0.*",
];

/// The baseline compute capability of the PTX (`compute_80`, JIT-compiled on newer GPUs).
pub const COMPUTE_CAP: u32 = 80;

/// The git-ignored folder of the project's own toolkit, relative to the workspace root.
pub const LOCAL_DIR: &str = ".cuda";

/// The pip `--target` folder inside [`LOCAL_DIR`].
pub const LOCAL_PKGS: &str = "pkgs";

/// Inside the pip target, the wheels lay out an ordinary toolkit tree (`bin/nvcc` with its
/// `nvcc.profile`, `nvvm/bin/cicc`, `nvvm/libdevice`, `include/` with `crt/`, `lib/`).
pub const WHEEL_ROOT: &str = "nvidia/cu13";

/// A CUDA compiler found on this machine.
#[derive(Clone, Debug)]
pub struct Toolkit {
    /// The `nvcc` executable.
    pub nvcc: PathBuf,
    /// The toolkit root (`nvcc`'s `bin/..`): `include/`, `lib/`.
    pub root: PathBuf,
    /// How it was found: `NVCC`, `CUDA_HOME`, `CUDA_PATH`, `.cuda` or `PATH`.
    pub source: &'static str,
}

impl Toolkit {
    fn at(nvcc: PathBuf, source: &'static str) -> Option<Toolkit> {
        if !nvcc.is_file() {
            return None;
        }
        let root = nvcc.parent()?.parent()?.to_path_buf();
        Some(Toolkit { nvcc, root, source })
    }

    /// The `bin/` folder holding nvcc (what tools that call plain `nvcc` need on `PATH`).
    pub fn bin_dir(&self) -> PathBuf {
        self.nvcc.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// `nvcc --version`'s release line (`Cuda compilation tools, release 13.0, V13.0.88`).
    pub fn version(&self) -> Option<String> {
        let out = Command::new(&self.nvcc).arg("--version").output().ok()?;
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).lines().find(|l| l.contains("release")).map(|l| l.trim().to_string())
    }

    /// The static CUDA runtime library folder (for linking host-compiled objects).
    pub fn lib_dir(&self) -> PathBuf {
        let lib64 = self.root.join("lib64");
        if lib64.join("libcudart_static.a").is_file() { lib64 } else { self.root.join("lib") }
    }
}

/// The project's own toolkit root: `<workspace>/.cuda/pkgs/nvidia/cu13`.
pub fn local_root(workspace: &Path) -> PathBuf {
    workspace.join(LOCAL_DIR).join(LOCAL_PKGS).join(WHEEL_ROOT)
}

/// The project's own toolkit in `.cuda/`, if installed.
pub fn find_local(workspace: &Path) -> Option<Toolkit> {
    Toolkit::at(local_root(workspace).join("bin").join("nvcc"), ".cuda")
}

/// Finds nvcc, first match wins: `$NVCC` (the executable), `$CUDA_HOME/bin/nvcc`,
/// `$CUDA_PATH/bin/nvcc`, the project's `.cuda/` install, `nvcc` on `PATH`.
pub fn find(workspace: &Path) -> Option<Toolkit> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = env("NVCC") {
        return Toolkit::at(p, "NVCC");
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(t) = env(var).and_then(|root| Toolkit::at(root.join("bin").join("nvcc"), var)) {
            return Some(t);
        }
    }
    if let Some(t) = find_local(workspace) {
        return Some(t);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find_map(|dir| Toolkit::at(dir.join("nvcc"), "PATH"))
}

/// The error text when no toolkit is found.
pub const NOT_FOUND: &str = "no CUDA compiler found: run `cargo xtask setup-cuda` (installs nvcc 13.0 from PyPI into \
     .cuda/), or point NVCC at an nvcc executable or CUDA_HOME at a toolkit";
