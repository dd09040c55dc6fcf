//! Helpers shared by the CLI integration tests (each test binary uses a subset).
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The qforge binary under test: the one cargo built, or `$QFORGE_BIN` where that is set (a
/// test binary run away from its build tree: the GPU kit points it at the kit's qforge).
pub fn qforge_bin() -> std::ffi::OsString {
    std::env::var_os("QFORGE_BIN").filter(|p| !p.is_empty()).unwrap_or_else(|| env!("CARGO_BIN_EXE_qforge").into())
}

pub fn qforge(args: &[&str]) -> Output {
    Command::new(qforge_bin()).args(args).output().expect("run qforge")
}

/// `qforge` with extra environment variables.
pub fn qforge_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(qforge_bin()).args(args).envs(env.iter().copied()).output().expect("run qforge")
}

pub struct Tmp(pub PathBuf);

impl Tmp {
    pub fn new(tag: &str) -> Tmp {
        let d = std::env::temp_dir().join(format!("qforge-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Tmp(d)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    pub fn s(&self, name: &str) -> String {
        self.path(name).to_string_lossy().into_owned()
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn write_f32(p: &Path, v: &[f32]) {
    std::fs::write(p, v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
}

pub fn read_f32(p: &Path) -> Vec<f32> {
    std::fs::read(p).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Exit code `code`, exactly one non-empty line on stderr, and no panic text.
pub fn assert_fails(out: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "want one line on stderr, got: {err}");
    assert!(err.to_lowercase().contains(&needle.to_lowercase()), "stderr {err:?} lacks {needle:?}");
}

pub fn qforge_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(qforge_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn qforge");
    // Feed stdin from a thread so a large output cannot deadlock against a full input pipe.
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}
