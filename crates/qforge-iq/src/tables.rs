//! The I-quant lookup tables: ggml's grids, sign and value tables, bit-exact with
//! `src/ggml-common.h`.
//!
//! One source: the values live in `tables/*.txt` (checked entry by entry against ggml's
//! compiled `dequantize_row_*` by `tables/gen_tables.py`). `build.rs` turns them into the
//! constants below, and [`c_header`] renders the very same constants as a C header for the
//! CUDA device code, so the Rust reference and the device code can never disagree.

include!(concat!(env!("OUT_DIR"), "/tables.rs"));

/// The shift of the iq1_s ternary grid values (ggml's `IQ1S_DELTA`).
pub const IQ1S_DELTA: f32 = 0.125;
/// The shift of the iq1_m ternary grid values (ggml's `IQ1M_DELTA`).
pub const IQ1M_DELTA: f32 = 0.125;

/// Bytes `j` of a grid word: the `j`-th value of that grid point.
#[inline(always)]
pub(crate) fn grid_byte(word: u64, j: usize) -> u8 {
    (word >> (8 * j)) as u8
}

fn render<T: Copy + Into<i128>>(out: &mut String, ctype: &str, name: &str, vals: &[T], hex_digits: Option<usize>) {
    use std::fmt::Write as _;
    let per_line = match hex_digits {
        Some(16) => 4,
        Some(8) => 8,
        _ => 16,
    };
    writeln!(out, "static const {ctype} {name}[{}] = {{", vals.len()).unwrap();
    for chunk in vals.chunks(per_line) {
        out.push_str("   ");
        for &v in chunk {
            let v: i128 = v.into();
            match hex_digits {
                Some(w) => write!(out, " 0x{v:0w$x},").unwrap(),
                None => write!(out, " {v},").unwrap(),
            }
        }
        out.push('\n');
    }
    out.push_str("};\n\n");
}

/// The tables as a self-contained C header (`static const uint64_t iq2xxs_grid[256] = {...};`
/// and so on, plus `IQ1S_DELTA` / `IQ1M_DELTA`), rendered from the same constants the Rust
/// reference uses. The CUDA issue prefixes the declarations with `__device__`.
pub fn c_header() -> String {
    let mut s = String::from(
        "// qforge-iq lookup tables: ggml's I-quant grids (src/ggml-common.h), rendered by\n\
         // qforge_iq::c_header() from crates/qforge-iq/tables/*.txt. Do not edit.\n\
         #pragma once\n#include <stdint.h>\n\n",
    );
    s.push_str(&format!("#define IQ1S_DELTA {:?}f\n#define IQ1M_DELTA {:?}f\n\n", IQ1S_DELTA, IQ1M_DELTA));
    render(&mut s, "uint8_t", "kmask_iq2xs", &KMASK_IQ2XS, None);
    render(&mut s, "uint8_t", "ksigns_iq2xs", &KSIGNS_IQ2XS, None);
    render(&mut s, "int8_t", "kvalues_iq4nl", &KVALUES_IQ4NL, None);
    render(&mut s, "uint64_t", "iq2xxs_grid", &IQ2XXS_GRID, Some(16));
    render(&mut s, "uint64_t", "iq2xs_grid", &IQ2XS_GRID, Some(16));
    render(&mut s, "uint64_t", "iq2s_grid", &IQ2S_GRID, Some(16));
    render(&mut s, "uint32_t", "iq3xxs_grid", &IQ3XXS_GRID, Some(8));
    render(&mut s, "uint32_t", "iq3s_grid", &IQ3S_GRID, Some(8));
    render(&mut s, "uint64_t", "iq1s_grid", &IQ1S_GRID, Some(16));
    s
}
