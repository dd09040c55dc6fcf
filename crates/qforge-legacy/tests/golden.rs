//! Golden tests against vectors produced by ggml's own C code (tests/golden/gen.py): the
//! shared conformance suite, plus what is specific to the legacy formats.

use qforge_core::f16;
use qforge_golden::{
    self as golden,
    conformance::{dequantize, find},
};
use qforge_legacy::FORMATS;

qforge_golden::conformance_suite!(
    FORMATS,
    names: &["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1"],
    // ggml's 8-bit quantizers ignore importance weights.
    ignores_weights: &["q8_0", "q8_1"],
);

/// Every legacy block holds 32 values; ggml has a to_float for all but q8_1 (an activation
/// format), and ggml's decode of the random blocks of q4_1, q5_1 has NaN somewhere.
#[test]
fn registry_and_golden_coverage() {
    let mut with_to_float = 0;
    for f in FORMATS {
        let d = f.desc();
        assert_eq!(d.block_size, 32, "{}", d.name);
        let Some(want) = golden::random_f32(d.name) else {
            assert_eq!(d.name, "q8_1");
            continue;
        };
        assert!(want.iter().any(|v| v.is_nan()) || d.name == "q8_0" || d.name == "q5_0" || d.name == "q4_0");
        with_to_float += 1;
    }
    assert_eq!(with_to_float, 5, "five legacy formats have a ggml to_float");
}

/// q8_1 has no ggml to_float: its random blocks decode as `d·q` with `d` the f16 scale.
#[test]
fn decode_q8_1_random_blocks_is_d_times_q() {
    let raw = golden::random_blocks("q8_1");
    let got = dequantize(find(FORMATS, "q8_1"), &raw, raw.len() / 36 * 32);
    for (i, blk) in raw.chunks_exact(36).enumerate() {
        let d = f16::from_le_bytes([blk[0], blk[1]]).to_f32();
        for j in 0..32 {
            let want = f32::from(blk[4 + j] as i8) * d;
            assert!(golden::same_f32(got[i * 32 + j], want), "block {i} element {j}");
        }
    }
}
