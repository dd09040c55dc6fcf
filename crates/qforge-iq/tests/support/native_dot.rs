//! Property checks of a family's native (integer) dot products, shared by the iq and fp4
//! tests (`#[path]`-included by both): `dot_row` equals the f64 dot of the dequantized weights
//! with the dequantized activations, `dot_rows` (mat-mul) gives `dot_row`'s bits for every
//! activation row, arbitrary weight bytes never panic, and activation rows of the wrong length
//! are errors.

use qforge_core::{ActRow, Format, OutRow};

/// Relative tolerance of `dot_row` against the f64 reference, of `Σ |w·a|`.
pub const RTOL: f64 = 1e-5;

/// The registered activation format (`DESC.dot_type`) of `f` among `acts`.
pub fn act_format(f: &dyn Format, acts: &[&'static dyn Format]) -> &'static dyn Format {
    let want = f.desc().dot_type.expect("a native-dot format names its dot_type");
    acts.iter().copied().find(|a| a.desc().name == want).unwrap_or_else(|| panic!("no {want} format"))
}

fn dequant(f: &dyn Format, bytes: &[u8], n: usize) -> Vec<f64> {
    let mut y = vec![0f32; n];
    f.dequant_row(bytes, OutRow::F32(&mut y)).unwrap();
    y.into_iter().map(f64::from).collect()
}

/// Quantizes `x` (the activations, cycled to the weight row's padded length) with `af`.
pub fn quantize_act(af: &dyn Format, x: &[f32], n: usize) -> Vec<u8> {
    let a: Vec<f32> = x.iter().copied().cycle().take(n).collect();
    let mut ab = vec![0u8; af.row_bytes(n).unwrap()];
    af.quantize_row(&a, None, &mut ab).unwrap();
    ab
}

/// The weight row `wb` of `f` dotted with activations `x` (quantized with `af`): no panic, a
/// value, and — where every weight decodes finite — the f64 reference within [`RTOL`].
pub fn check_dot(f: &dyn Format, af: &dyn Format, wb: &[u8], x: &[f32]) -> Result<(), String> {
    let d = f.desc();
    let n = wb.len() / d.block_bytes * d.block_size;
    let ab = quantize_act(af, x, n);
    let got = match f.dot_row(wb, 0, &[], ActRow::Blocks(&ab)) {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(format!("{}: dot_row failed: {e}", d.name)),
        None => return Err(format!("{}: no native dot", d.name)),
    };
    let (wd, ad) = (dequant(f, wb, n), dequant(af, &ab, n));
    if wd.iter().any(|v| !v.is_finite()) {
        return Ok(()); // NaN / Inf scales (arbitrary bytes): only "no panic" is claimed
    }
    let want: f64 = wd.iter().zip(&ad).map(|(w, a)| w * a).sum();
    let scale: f64 = wd.iter().zip(&ad).map(|(w, a)| (w * a).abs()).sum();
    if scale > 1e30 {
        return Ok(()); // f32 block products may overflow where the f64 reference does not
    }
    let diff = (f64::from(got) - want).abs();
    if diff <= RTOL * scale + 1e-30 {
        Ok(())
    } else {
        Err(format!("{}: {n} values: dot_row {got}, f64 reference {want} (|diff| {diff:e}, Σ|w·a| {scale:e})", d.name))
    }
}

/// Activation rows one byte or one block too short or too long are errors, other activation
/// kinds are declined (`None`), and nothing panics.
pub fn check_wrong_lengths(f: &dyn Format, af: &dyn Format, wb: &[u8]) -> Result<(), String> {
    let d = f.desc();
    let n = wb.len() / d.block_bytes * d.block_size;
    let good = af.row_bytes(n).unwrap();
    let ab = vec![0u8; good + af.desc().block_bytes];
    let bads = [good - 1, good + 1, good - af.desc().block_bytes, good + af.desc().block_bytes, 0];
    for len in bads {
        if !matches!(f.dot_row(wb, 0, &[], ActRow::Blocks(&ab[..len])), Some(Err(_))) {
            return Err(format!("{}: an activation row of {len} bytes (want {good}) is not an error", d.name));
        }
    }
    let q = vec![0i8; n];
    if f.dot_row(wb, 0, &[], ActRow::Int8 { q: &q, scale: 1.0, zero_point: 0 }).is_some() {
        return Err(format!("{}: int8 activations must be declined", d.name));
    }
    match f.dot_row(&wb[..wb.len() - 1], 0, &[], ActRow::Blocks(&ab[..good])) {
        Some(Err(_)) => Ok(()),
        _ => Err(format!("{}: a weight row of partial blocks must be an error", d.name)),
    }
}

/// Every format of `formats`: the row quantized from `x` (1..=4 blocks, partial last block
/// included) dotted with activations `a`, and the wrong-length checks.
pub fn check_quantized(
    formats: &[&dyn Format],
    acts: &[&'static dyn Format],
    x: &[f32],
    a: &[f32],
) -> Result<(), String> {
    for f in formats {
        let af = act_format(*f, acts);
        let mut wb = vec![0u8; f.row_bytes(x.len()).unwrap()];
        f.quantize_row(x, None, &mut wb).unwrap();
        check_dot(*f, af, &wb, a)?;
        check_rows(*f, af, &wb, a)?;
        check_wrong_lengths(*f, af, &wb)?;
    }
    Ok(())
}

/// Every format of `formats`: `nb` blocks of arbitrary bytes dotted with activations `a`.
pub fn check_arbitrary(
    formats: &[&dyn Format],
    acts: &[&'static dyn Format],
    bytes: &[u8],
    nb: usize,
    a: &[f32],
) -> Result<(), String> {
    for f in formats {
        let af = act_format(*f, acts);
        let bb = f.desc().block_bytes;
        let wb = &bytes[..nb.clamp(1, bytes.len() / bb) * bb];
        check_dot(*f, af, wb, a)?;
        check_rows(*f, af, wb, a)?;
        check_wrong_lengths(*f, af, wb)?;
    }
    Ok(())
}

/// `dot_rows` of the weight row `wb` with 1..=11 activation rows (rotations of `x`): each
/// output bit-identical to `dot_row` on that row (the mat-mul kernel's contract).
pub fn check_rows(f: &dyn Format, af: &dyn Format, wb: &[u8], x: &[f32]) -> Result<(), String> {
    let d = f.desc();
    let n = wb.len() / d.block_bytes * d.block_size;
    let rows: Vec<Vec<u8>> = (0..11)
        .map(|r| {
            let k = (r * 37) % x.len().max(1);
            let xr: Vec<f32> = x[k..].iter().chain(&x[..k]).map(|v| v * (1.0 + r as f32 / 8.0)).collect();
            quantize_act(af, &xr, n)
        })
        .collect();
    for m in 1..=rows.len() {
        let acts: Vec<ActRow<'_>> = rows[..m].iter().map(|r| ActRow::Blocks(r)).collect();
        let mut out = vec![0f32; m];
        match f.dot_rows(wb, 0, &[], &acts, &mut out) {
            Some(Ok(())) => {}
            other => return Err(format!("{}: dot_rows with {m} rows: {other:?}", d.name)),
        }
        for (i, (o, a)) in out.iter().zip(&acts).enumerate() {
            let want = f.dot_row(wb, 0, &[], *a).and_then(Result::ok).ok_or(format!("{}: dot_row failed", d.name))?;
            if o.to_bits() != want.to_bits() && !(o.is_nan() && want.is_nan()) {
                return Err(format!("{}: dot_rows row {i} of {m}: {o:e}, dot_row {want:e}", d.name));
            }
        }
    }
    Ok(())
}
