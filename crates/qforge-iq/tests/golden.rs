//! qforge-iq against the golden vectors ggml's own C code produced (tests/golden/gen.py): the
//! shared conformance suite, plus what is specific to the I-quants.

qforge_golden::conformance_suite!(
    qforge_iq::FORMATS,
    names: &["iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs"],
    cases: 128,
    // As in ggml: iq4_xs on the `tiny` dataset (|x| ~ 1e-5), whose super-block scale
    // `max / 32 / 127` underflows f16 to 0 with or without weights, so both decode to zeros.
    imatrix_underflows: &[("iq4_xs", "tiny")],
    // The activation formats of the native dots (checked against ggml's from_float).
    act_formats: act_formats(),
);

/// q8_k (the k family's) and q8_0 (the legacy family's), as those families register them.
fn act_formats() -> &'static [&'static dyn qforge_core::Format] {
    static ACTS: std::sync::OnceLock<Vec<&'static dyn qforge_core::Format>> = std::sync::OnceLock::new();
    ACTS.get_or_init(|| {
        let all = qforge_k::FORMATS.iter().chain(qforge_legacy::FORMATS);
        all.copied().filter(|f| matches!(f.desc().name, "q8_k" | "q8_0")).collect()
    })
}

#[test]
fn registry_lists_the_i_quants() {
    for f in qforge_iq::FORMATS {
        let d = f.desc();
        assert_eq!((d.family, d.role), ("iq", qforge_core::Role::Weight));
        // ggml's type_traits vec_dot_type: q8_0 for iq4_nl (32-blocks), q8_k for the others.
        assert_eq!(d.dot_type, Some(if d.name == "iq4_nl" { "q8_0" } else { "q8_k" }));
        assert!(d.cuda.is_some_and(|c| c.traits == format!("qf_{}", d.name)));
        // ggml has a to_float and honours importance weights for every I-quant.
        let e = qforge_golden::entry(d.name);
        assert!(e.has_to_float && e.quant_files.iter().any(|q| q == "quant_imatrix.bin"), "{}", d.name);
    }
}
