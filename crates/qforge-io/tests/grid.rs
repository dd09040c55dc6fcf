//! FP8 weights with `_scale_inv` companions (DeepSeek-V3 layout, written by the HF
//! safetensors package with ml_dtypes values) ⇄ one qforge grid-layout tensor (the fp8 formats).

mod common;

use common::{assert_bits_eq, f32_file, manifest, read};
use qforge_io::{Container, ModelFile, SafetensorsFile, StDtype, decode_f32, grid};

#[test]
fn companion_merge_and_split_are_inverse_on_the_fixture() {
    let bytes = read("fp8.safetensors");
    let s = SafetensorsFile::parse(&bytes).unwrap();
    for w in ["layers.0.mlp.down.weight", "layers.0.mlp.up.weight"] {
        let t = s.tensor(w).unwrap();
        let f = grid::format_of(t.dtype).unwrap();
        assert_eq!(grid::st_dtypes(f), Some((t.dtype, StDtype::F32)));
        let c = s.tensor(&grid::companion_name(w)).unwrap();
        let (n, k) = grid::rows_cols(&t.shape).unwrap();
        assert_eq!(c.shape, [n.div_ceil(128), k.div_ceil(128)], "{w}: the grid is ceil(N/128) x ceil(K/128)");
        assert_eq!(grid::grid_dims(f, n, k).unwrap(), c.shape[..]);
        let merged = grid::merge(f, w, t.data, c.data, n, k).unwrap();
        assert_eq!(merged.len(), n * k + 4 * c.shape[0] * c.shape[1]);
        let (v, g) = grid::split(f, &merged, n, k).unwrap();
        assert_eq!((v, g), (t.data, c.data));
        assert!(grid::merge(f, w, t.data, &c.data[4..], n, k).is_err(), "a short grid is refused");
        assert!(grid::split(f, &merged[1..], n, k).is_err(), "a short buffer is refused");
        let ones = grid::unit_grid(f, n, k);
        assert_eq!(ones, 1f32.to_le_bytes().repeat(c.shape[0] * c.shape[1]));
    }
}

#[test]
fn fp8_weights_become_one_tensor_and_decode_like_ml_dtypes() {
    let bytes = read("fp8.safetensors");
    let m = ModelFile::parse(&bytes, Container::Safetensors).unwrap();
    let down = m.tensor("layers.0.mlp.down.weight").unwrap();
    assert_eq!(down.ty.name(), "fp8_e4m3");
    assert_eq!(down.companion.as_deref(), Some("layers.0.mlp.down.weight_scale_inv"));
    assert!(m.tensor("layers.0.mlp.down.weight_scale_inv").is_none(), "the companion is folded in");
    assert_eq!(m.tensor("layers.0.mlp.up.weight").unwrap().ty.name(), "fp8_e5m2");
    let q = down.quant_tensor().unwrap().unwrap();
    assert_eq!(q.data().len(), 130 * 72 + 2 * 4);
    let spec = &manifest()["safetensors"]["fp8.safetensors"];
    let want = f32_file("fp8.safetensors.expect.f32");
    let mut at = 0;
    for name in spec["expect_order"].as_array().unwrap() {
        let got = decode_f32(m.tensor(name.as_str().unwrap()).unwrap()).unwrap();
        assert_bits_eq(&got, &want[at..at + got.len()], name.as_str().unwrap());
        at += got.len();
    }
}
