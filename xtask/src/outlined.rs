//! The check `cargo xtask bench` runs on the release CLI before measuring it: qforge functions
//! that call a `core::arch` intrinsic out of line.
//!
//! An intrinsic is a `#[target_feature]` function; it is inlined only into code compiled with
//! its features. A closure, or any helper LLVM declines to inline into the kernel that has the
//! features, is compiled without them, and each intrinsic in it becomes a call: a kernel 10 to
//! 50 times slower that still computes the right bits, which no test notices (q1_0 / q2_0 bf16
//! rows from a `for_each` closure read 0.3 Gel/s on a Zen 5 where the AVX2 build read 17).
//! The disassembly names every such call, so the bench lists them above its table.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// The qforge functions of `bin` (demangled) that call intrinsics out of line, with the number
/// of calls; `None` where `objdump` (binutils) is not there to disassemble it.
pub fn scan(bin: &Path) -> Option<Vec<(String, usize)>> {
    let mut child = Command::new("objdump")
        .args(["-d", "-C", "--no-show-raw-insn"])
        .arg(bin)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let found = find(BufReader::new(child.stdout.take()?).lines().map_while(Result::ok));
    child.wait().ok().filter(|s| s.success())?;
    Some(found)
}

/// [`scan`] over `objdump -d -C` output lines: per function whose name holds `qforge`, its
/// calls to functions under `core::core_arch::`, in the order the functions come.
fn find(lines: impl Iterator<Item = String>) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    let mut current: Option<String> = None;
    for line in lines {
        // A function starts with `<address> <name>:`.
        if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")).map(|(_, n)| n) {
            current = name.contains("qforge").then(|| name.to_string());
            continue;
        }
        let Some(f) = &current else { continue };
        if line.contains("\tcall") && line.contains("<core::core_arch::") {
            match out.last_mut() {
                Some((g, n)) if g == f => *n += 1,
                _ => out.push((f.clone(), 1)),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_qforge_callers_of_intrinsics_only() {
        let text = "\
0000000000360db0 <core::core_arch::x86::avx::_mm256_loadu_si256>:
  360db0:\tvmovups (%rdi),%ymm0
00000000004321e0 <qforge_lowbit::codec::groups::{{closure}}>:
  43222f:\tcall   42f770 <core::core_arch::x86::avx2::_mm256_shuffle_epi8>
  432234:\tmov    %rax,%r15
  43224e:\tcall   42f770 <core::core_arch::x86::avx2::_mm256_shuffle_epi8>
  432250:\tcall   42f780 <qforge_simd::other>
0000000000436000 <aho_corasick::packed::teddy::new>:
  436008:\tcall   360db0 <core::core_arch::x86::avx::_mm256_loadu_si256>
0000000000437000 <qforge_k::simd::codes::rows_vnni>:
  437008:\tvpdpwssd %ymm1,%ymm2,%ymm3
";
        let found = find(text.lines().map(String::from));
        assert_eq!(found, vec![("qforge_lowbit::codec::groups::{{closure}}".to_string(), 2)]);
    }
}
