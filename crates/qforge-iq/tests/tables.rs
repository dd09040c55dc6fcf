//! The one-source tables: spot values and sizes against ggml's src/ggml-common.h, and the C
//! header rendered for the CUDA device code against the Rust constants (parsed back, and
//! compiled with the system C compiler when there is one).

use qforge_iq::tables::*;

#[test]
fn tables_match_ggml_common_h() {
    // Values as printed in ggml's src/ggml-common.h.
    assert_eq!(KMASK_IQ2XS, [1, 2, 4, 8, 16, 32, 64, 128]);
    assert_eq!(&KSIGNS_IQ2XS[..8], &[0, 129, 130, 3, 132, 5, 6, 135]);
    assert_eq!(&KSIGNS_IQ2XS[120..], &[120, 249, 250, 123, 252, 125, 126, 255]);
    assert_eq!(KVALUES_IQ4NL, [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]);
    assert_eq!(&IQ2XXS_GRID[..4], &[0x0808080808080808, 0x080808080808082b, 0x0808080808081919, 0x0808080808082b08]);
    assert_eq!(IQ2XXS_GRID[255], 0x2b2b2b1908081908);
    assert_eq!(&IQ2XS_GRID[..2], &[0x0808080808080808, 0x080808080808082b]);
    assert_eq!(IQ2XS_GRID[31], 0x0808081908080819);
    assert_eq!(IQ2S_GRID[0], 0x0808080808080808);
    assert_eq!(IQ3XXS_GRID[0], 0x04040404);
    assert_eq!(IQ3S_GRID[0], 0x01010101);
    assert_eq!(IQ1S_GRID[0], 0xffffffffffffffff);
    assert_eq!((IQ1S_DELTA, IQ1M_DELTA), (0.125, 0.125));
    // The value alphabets of the grids.
    let bytes = |w: u64, n: usize| (0..n).map(move |j| (w >> (8 * j)) as u8);
    assert!(
        IQ2XXS_GRID
            .iter()
            .chain(&IQ2XS_GRID)
            .chain(&IQ2S_GRID)
            .flat_map(|&w| bytes(w, 8))
            .all(|b| [8, 25, 43].contains(&b))
    );
    assert!(IQ3XXS_GRID.iter().flat_map(|&w| bytes(w as u64, 4)).all(|b| [4, 12, 20, 28, 36, 44, 52, 62].contains(&b)));
    assert!(IQ3S_GRID.iter().flat_map(|&w| bytes(w as u64, 4)).all(|b| b % 2 == 1 && b <= 15));
    assert!(IQ1S_GRID.iter().flat_map(|&w| bytes(w, 8)).all(|b| [0xff, 0, 1].contains(&b)));
    // ksigns: the 7 stored bits plus an eighth making the number of negatives even.
    for (i, &s) in KSIGNS_IQ2XS.iter().enumerate() {
        assert_eq!(s as usize & 127, i);
        assert_eq!(s.count_ones() % 2, 0);
    }
}

/// `(C type, name, values)` of every table, widened to u64 (two's complement for int8_t).
fn rust_tables() -> Vec<(&'static str, &'static str, Vec<u64>)> {
    vec![
        ("uint8_t", "kmask_iq2xs", KMASK_IQ2XS.iter().map(|&v| v as u64).collect()),
        ("uint8_t", "ksigns_iq2xs", KSIGNS_IQ2XS.iter().map(|&v| v as u64).collect()),
        ("int8_t", "kvalues_iq4nl", KVALUES_IQ4NL.iter().map(|&v| v as i64 as u64).collect()),
        ("uint64_t", "iq2xxs_grid", IQ2XXS_GRID.to_vec()),
        ("uint64_t", "iq2xs_grid", IQ2XS_GRID.to_vec()),
        ("uint64_t", "iq2s_grid", IQ2S_GRID.to_vec()),
        ("uint32_t", "iq3xxs_grid", IQ3XXS_GRID.iter().map(|&v| v as u64).collect()),
        ("uint32_t", "iq3s_grid", IQ3S_GRID.iter().map(|&v| v as u64).collect()),
        ("uint64_t", "iq1s_grid", IQ1S_GRID.to_vec()),
    ]
}

/// Parses `static const T name[N] = { v, ... };` out of the header.
fn parse_header(h: &str, name: &str) -> (String, usize, Vec<u64>) {
    let start = h.find(&format!(" {name}[")).unwrap_or_else(|| panic!("{name} missing"));
    let decl = &h[h[..start].rfind("static const ").unwrap()..];
    let ctype = decl["static const ".len()..].split_whitespace().next().unwrap().to_string();
    let n: usize = decl[decl.find('[').unwrap() + 1..decl.find(']').unwrap()].parse().unwrap();
    let body = &decl[decl.find('{').unwrap() + 1..decl.find("};").unwrap()];
    let vals = body
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
            None => s.parse::<i64>().unwrap() as u64,
        })
        .collect();
    (ctype, n, vals)
}

#[test]
fn c_header_has_the_rust_values() {
    let h = c_header();
    assert!(h.contains("#define IQ1S_DELTA 0.125f") && h.contains("#define IQ1M_DELTA 0.125f"));
    for (ctype, name, vals) in rust_tables() {
        let (ct, n, parsed) = parse_header(&h, name);
        assert_eq!((ct.as_str(), n), (ctype, vals.len()), "{name}");
        assert_eq!(parsed, vals, "{name}");
    }
}

/// The header compiles as C and its values agree with Rust's: a small program prints a
/// checksum of every table. Needs a C compiler (`$CC`, else `cc`); fails without one.
#[test]
fn c_header_compiles_and_agrees() {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let dir = std::env::temp_dir().join(format!("qforge-iq-header-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("iq_tables.h"), c_header()).unwrap();
    let mut prog = String::from("#include <stdio.h>\n#include \"iq_tables.h\"\nint main(void) {\n");
    for (_, name, _) in rust_tables() {
        prog.push_str(&format!(
            "  {{ unsigned long long s = 0; for (unsigned i = 0; i < sizeof({name})/sizeof({name}[0]); ++i) \
             s = s * 1099511628211ULL + (unsigned long long){name}[i]; printf(\"{name} %llu\\n\", s); }}\n"
        ));
    }
    prog.push_str("  printf(\"delta %.9g %.9g\\n\", IQ1S_DELTA, IQ1M_DELTA);\n  return 0;\n}\n");
    std::fs::write(dir.join("main.c"), prog).unwrap();
    let exe = dir.join("tables");
    let built = std::process::Command::new(&cc)
        .args(["-std=c99", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(dir.join("main.c"))
        .status();
    match built {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("the C header does not compile with {cc}: {s}"),
        Err(e) => panic!("no C compiler ({cc}: {e}): set CC to one (Rust's linker on Linux is `cc`)"),
    }
    let out = std::process::Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for (_, name, vals) in rust_tables() {
        // C converts int8_t to unsigned long long by sign extension, as Rust's `as` above.
        let sum = vals.iter().fold(0u64, |s, &v| s.wrapping_mul(1099511628211).wrapping_add(v));
        assert!(text.contains(&format!("{name} {sum}\n")), "{name}: C says {text}");
    }
    assert!(text.contains("delta 0.125 0.125"));
    let _ = std::fs::remove_dir_all(&dir);
}
