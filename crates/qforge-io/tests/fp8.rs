//! FP8 weights with `_scale_inv` companions (DeepSeek-V3 layout, written by the HF
//! safetensors package with ml_dtypes values) ⇄ one qforge fp8 block-scaled tensor.

mod common;

use common::{assert_bits_eq, f32_file, manifest, read};
use qforge_io::{Container, ModelFile, SafetensorsFile, decode_f32, fp8};

#[test]
fn companion_merge_and_split_are_inverse_on_the_fixture() {
    let bytes = read("fp8.safetensors");
    let s = SafetensorsFile::parse(&bytes).unwrap();
    for w in ["layers.0.mlp.down.weight", "layers.0.mlp.up.weight"] {
        let t = s.tensor(w).unwrap();
        let c = s.tensor(&fp8::companion_name(w)).unwrap();
        let (n, k) = fp8::rows_cols(&t.shape).unwrap();
        assert_eq!(c.shape, fp8::grid_dims(n, k), "{w}: the grid is ceil(N/128) x ceil(K/128)");
        let merged = fp8::merge(w, t.data, c.data, n, k).unwrap();
        assert_eq!(merged.len(), n * k + 4 * c.shape[0] * c.shape[1]);
        let (v, g) = fp8::split(&merged, n, k).unwrap();
        assert_eq!((v, g), (t.data, c.data));
        assert!(fp8::merge(w, t.data, &c.data[4..], n, k).is_err(), "a short grid is refused");
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
