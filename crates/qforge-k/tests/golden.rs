//! qforge-k against the golden vectors ggml's own C code produced (tests/golden/gen.py): the
//! shared conformance suite, plus what is specific to the k-quants.

qforge_golden::conformance_suite!(
    qforge_k::FORMATS,
    names: &["q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k"],
    // q8_k is an activation format: ggml's quantizer has no importance-weighted variant.
    ignores_weights: &["q8_k"],
    // The `tiny` dataset (|x| ~ 1e-5): the f16 super-block scale is subnormal; q6_k's
    // underflows to 0 with or without weights, and ggml's own q5_k imatrix bytes are worse
    // than its plain ones there (we reproduce both byte for byte).
    imatrix_underflows: &[("q6_k", "tiny")],
    imatrix_no_gain: &[("q5_k", "tiny")],
);

#[test]
fn registry_lists_the_k_quants() {
    for f in qforge_k::FORMATS {
        let d = f.desc();
        assert_eq!(d.family, "k");
        assert_eq!(d.dot_type, Some("q8_k"));
    }
}
