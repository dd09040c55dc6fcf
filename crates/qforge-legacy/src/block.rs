//! Block layouts of the legacy formats (identical to ggml's `block_q*` structs) and the
//! packing of their integer quants.
//!
//! Every struct is `#[repr(C)]` over byte arrays and [`F16Le`], so it has alignment 1 and can
//! be viewed in place in any byte buffer. Quants are exchanged with the codec as `i32` values
//! in the *decode domain*: `x = q·d` for the symmetric formats (q signed) and `x = q·d + m` for
//! the affine ones (q unsigned).

use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;

/// Elements per block, for every legacy format.
pub const QK: usize = 32;

/// How a format maps its integer quant `q` back to a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `x = q·d` with `q` in `[-2^(bits-1), 2^(bits-1))`, stored as `q + 2^(bits-1)` (q4_0,
    /// q5_0) or directly as an `i8` (q8_0, q8_1).
    Symmetric,
    /// `x = q·d + m` with `q` in `[0, 2^bits)` (q4_1, q5_1).
    Affine,
}

/// What the generic codec needs from a block layout.
pub(crate) trait LegacyBlock: Pod {
    const KIND: Kind;
    /// Bits per quant: 4, 5 or 8.
    const BITS: u32;
    /// Whether quantization uses importance weights (ggml ignores them for q8_0 and q8_1).
    const USES_WEIGHTS: bool;

    /// The stored f16 scale `d`.
    fn d_f16(&self) -> F16Le;
    /// The stored f16 offset `m`; +0.0 for symmetric formats, which have none.
    fn m_f16(&self) -> F16Le {
        F16Le([0, 0])
    }
    /// The scale `d`, widened from f16.
    #[inline(always)]
    fn d(&self) -> f32 {
        self.d_f16().get()
    }
    /// The offset `m` (0 for symmetric formats, which never add it).
    #[inline(always)]
    fn m(&self) -> f32 {
        self.m_f16().get()
    }
    /// The 32 quants in the decode domain.
    fn quants(&self) -> [i32; QK];
    /// Store the f32 scale / offset (rounded to f16 here, as ggml does) and the quants.
    fn store(&mut self, d: f32, m: f32, q: &[i32; QK]);
    /// How the 4- and 5-bit layouts are written from fields already in their stored form (the
    /// AVX2 reference quantizer's output); `None` for the 8-bit ones.
    const STORE_PACKED: Option<fn(&mut Self, Packed)> = None;
    /// For the 4- and 5-bit formats: where their codes are, for f16 / bf16 rows looked up in a
    /// table per block (`qforge_simd::half_lut`).
    const TABLE_CODES: Option<TableCodes<Self>> = None;
    /// For the 8-bit formats: their 32 values as signed bytes, for rows decoded in one pass
    /// (`qforge_simd::i8_groups`: f16 / bf16 rounded in registers); `None` for the others.
    const I8_VALUES: Option<fn(&Self) -> &[i8; QK]> = None;
}

/// Where a 4- or 5-bit block's codes are: the low nibbles in split-half order, the fifth bits
/// (bit `j` of the little-endian word is element `j`'s; `None` for 4-bit codes), and the
/// offset the decode subtracts from the code.
pub(crate) struct TableCodes<B> {
    pub qs: fn(&B) -> &[u8; 16],
    pub qh: Option<fn(&B) -> [u8; 4]>,
    pub offset: i32,
}

/// A 4- or 5-bit block's fields in their stored form: `d` and `m` (unused by the symmetric
/// formats) as f16, the low nibbles `qs` (element `j` low, `j + 16` high) and the fifth bits
/// `qh` (bit `j` of the little-endian word is element `j`'s; unused by q4_0 / q4_1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Packed {
    pub d: F16Le,
    pub m: F16Le,
    pub qs: [u8; 16],
    pub qh: [u8; 4],
}

/// Low nibbles hold elements 0..16, high nibbles elements 16..32 (ggml's order).
#[inline(always)]
fn unpack_nibbles(qs: &[u8; 16]) -> [u8; QK] {
    let mut c = [0u8; QK];
    for (j, &b) in qs.iter().enumerate() {
        c[j] = b & 0x0F;
        c[j + 16] = b >> 4;
    }
    c
}

#[inline(always)]
fn pack_nibbles(codes: &[u8; QK]) -> [u8; 16] {
    let mut qs = [0u8; 16];
    for (j, b) in qs.iter_mut().enumerate() {
        *b = (codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4);
    }
    qs
}

/// Bit `j` of the little-endian `qh` word is bit 4 of element `j`.
#[inline(always)]
fn unpack_high(qh: [u8; 4], codes: &mut [u8; QK]) {
    // Byte `j / 8` of `qh`, tested against bit `j % 8`: a byte broadcast, an AND and a
    // compare per element, which vectorizes (a variable shift per element does not, well).
    for (j, c) in codes.iter_mut().enumerate() {
        *c |= if qh[j / 8] & (1 << (j % 8)) != 0 { 0x10 } else { 0 };
    }
}

#[inline(always)]
fn pack_high(codes: &[u8; QK]) -> [u8; 4] {
    let h = codes.iter().enumerate().fold(0u32, |h, (j, &c)| h | (u32::from((c >> 4) & 1) << j));
    h.to_le_bytes()
}

/// Codes (`0..2^bits`) from quants, with the symmetric offset removed / added.
/// (Plain loops: `array::map` is not reliably inlined into a vectorized loop.)
fn to_codes(q: &[i32; QK], offset: i32) -> [u8; QK] {
    let mut c = [0u8; QK];
    for (c, &v) in c.iter_mut().zip(q) {
        *c = (v + offset) as u8;
    }
    c
}

#[inline(always)]
fn from_codes(c: &[u8; QK], offset: i32) -> [i32; QK] {
    let mut q = [0i32; QK];
    for (q, &v) in q.iter_mut().zip(c) {
        *q = i32::from(v) - offset;
    }
    q
}

/// The `i8` quants of q8_0 / q8_1, widened.
#[inline(always)]
fn widen(qs: &[i8; QK]) -> [i32; QK] {
    let mut q = [0i32; QK];
    for (q, &v) in q.iter_mut().zip(qs) {
        *q = i32::from(v);
    }
    q
}

/// Quants stored as `i8` (C's truncating conversion, as ggml's `int8_t` stores).
#[inline(always)]
fn narrow(q: &[i32; QK]) -> [i8; QK] {
    let mut qs = [0i8; QK];
    for (b, &v) in qs.iter_mut().zip(q) {
        *b = v as i8;
    }
    qs
}

qforge_core::c_block! {
    /// q4_0: `d: f16, qs: [u8; 16]` — 18 bytes.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
    pub struct BlockQ4_0 {
        /// Scale (f16): `x = d · (q − 8)`.
        pub d: F16Le,
        /// 32 unsigned 4-bit codes: byte `j` holds element `j` in its low nibble and element
        /// `j + 16` in its high nibble.
        pub qs: [u8; 16],
    }
}

qforge_core::c_block! {
    /// q4_1: `d: f16, m: f16, qs: [u8; 16]` — 20 bytes.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
    pub struct BlockQ4_1 {
        /// Scale (f16): `x = d · q + m`.
        pub d: F16Le,
        /// Minimum (f16), added to every value.
        pub m: F16Le,
        /// 32 unsigned 4-bit codes: byte `j` holds element `j` (low nibble) and `j + 16` (high).
        pub qs: [u8; 16],
    }
}

qforge_core::c_block! {
    /// q5_0: `d: f16, qh: [u8; 4], qs: [u8; 16]` — 22 bytes.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
    pub struct BlockQ5_0 {
        /// Scale (f16): `x = d · (q − 16)`.
        pub d: F16Le,
        /// The fifth bit of each of the 32 codes: bit `j` of this little-endian u32 is element `j`'s.
        pub qh: [u8; 4],
        /// The low 4 bits of the 32 codes: element `j` in the low nibble of byte `j`, element `j + 16`
        /// in the high nibble.
        pub qs: [u8; 16],
    }
}

qforge_core::c_block! {
    /// q5_1: `d: f16, m: f16, qh: [u8; 4], qs: [u8; 16]` — 24 bytes.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
    pub struct BlockQ5_1 {
        /// Scale (f16): `x = d · q + m`.
        pub d: F16Le,
        /// Minimum (f16), added to every value.
        pub m: F16Le,
        /// The fifth bit of each of the 32 codes: bit `j` of this little-endian u32 is element `j`'s.
        pub qh: [u8; 4],
        /// The low 4 bits of the 32 codes: element `j` in the low nibble of byte `j`, element `j + 16`
        /// in the high nibble.
        pub qs: [u8; 16],
    }
}

qforge_core::c_block! {
    /// q8_0: `d: f16, qs: [i8; 32]` — 34 bytes.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
    pub struct BlockQ8_0 {
        /// Scale (f16): `x = d · q`.
        pub d: F16Le,
        /// The 32 signed 8-bit codes, in element order.
        pub qs: [i8; QK],
    }
}

qforge_core::c_block! {
    /// q8_1: `d: f16, s: f16 (= d·Σq), qs: [i8; 32]` — 36 bytes.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
    pub struct BlockQ8_1 {
        /// Scale (f16): `x = d · q`.
        pub d: F16Le,
        /// `d · Σ q` (f16), precomputed for the dot products of q4_1 / q5_1 weights (their `m` term).
        pub s: F16Le,
        /// The 32 signed 8-bit codes, in element order.
        pub qs: [i8; QK],
    }
}

impl LegacyBlock for BlockQ4_0 {
    const KIND: Kind = Kind::Symmetric;
    const BITS: u32 = 4;
    const USES_WEIGHTS: bool = true;
    const TABLE_CODES: Option<TableCodes<Self>> = Some(TableCodes { qs: |b| &b.qs, qh: None, offset: 8 });
    const STORE_PACKED: Option<fn(&mut Self, Packed)> = Some(|b, p| {
        b.d = p.d;
        b.qs = p.qs;
    });
    #[inline(always)]
    fn d_f16(&self) -> F16Le {
        self.d
    }
    #[inline(always)]
    fn quants(&self) -> [i32; QK] {
        from_codes(&unpack_nibbles(&self.qs), 8)
    }
    #[inline(always)]
    fn store(&mut self, d: f32, _m: f32, q: &[i32; QK]) {
        self.d = F16Le::from_f32(d);
        self.qs = pack_nibbles(&to_codes(q, 8));
    }
}

impl LegacyBlock for BlockQ4_1 {
    const KIND: Kind = Kind::Affine;
    const BITS: u32 = 4;
    const USES_WEIGHTS: bool = true;
    const TABLE_CODES: Option<TableCodes<Self>> = Some(TableCodes { qs: |b| &b.qs, qh: None, offset: 0 });
    const STORE_PACKED: Option<fn(&mut Self, Packed)> = Some(|b, p| {
        b.d = p.d;
        b.m = p.m;
        b.qs = p.qs;
    });
    #[inline(always)]
    fn d_f16(&self) -> F16Le {
        self.d
    }
    #[inline(always)]
    fn m_f16(&self) -> F16Le {
        self.m
    }
    #[inline(always)]
    fn quants(&self) -> [i32; QK] {
        from_codes(&unpack_nibbles(&self.qs), 0)
    }
    #[inline(always)]
    fn store(&mut self, d: f32, m: f32, q: &[i32; QK]) {
        self.d = F16Le::from_f32(d);
        self.m = F16Le::from_f32(m);
        self.qs = pack_nibbles(&to_codes(q, 0));
    }
}

impl LegacyBlock for BlockQ5_0 {
    const KIND: Kind = Kind::Symmetric;
    const BITS: u32 = 5;
    const USES_WEIGHTS: bool = true;
    const TABLE_CODES: Option<TableCodes<Self>> = Some(TableCodes { qs: |b| &b.qs, qh: Some(|b| b.qh), offset: 16 });
    const STORE_PACKED: Option<fn(&mut Self, Packed)> = Some(|b, p| {
        b.d = p.d;
        b.qh = p.qh;
        b.qs = p.qs;
    });
    #[inline(always)]
    fn d_f16(&self) -> F16Le {
        self.d
    }
    #[inline(always)]
    fn quants(&self) -> [i32; QK] {
        let mut c = unpack_nibbles(&self.qs);
        unpack_high(self.qh, &mut c);
        from_codes(&c, 16)
    }
    #[inline(always)]
    fn store(&mut self, d: f32, _m: f32, q: &[i32; QK]) {
        let c = to_codes(q, 16);
        self.d = F16Le::from_f32(d);
        self.qh = pack_high(&c);
        self.qs = pack_nibbles(&c);
    }
}

impl LegacyBlock for BlockQ5_1 {
    const KIND: Kind = Kind::Affine;
    const BITS: u32 = 5;
    const USES_WEIGHTS: bool = true;
    const TABLE_CODES: Option<TableCodes<Self>> = Some(TableCodes { qs: |b| &b.qs, qh: Some(|b| b.qh), offset: 0 });
    const STORE_PACKED: Option<fn(&mut Self, Packed)> = Some(|b, p| {
        b.d = p.d;
        b.m = p.m;
        b.qh = p.qh;
        b.qs = p.qs;
    });
    #[inline(always)]
    fn d_f16(&self) -> F16Le {
        self.d
    }
    #[inline(always)]
    fn m_f16(&self) -> F16Le {
        self.m
    }
    #[inline(always)]
    fn quants(&self) -> [i32; QK] {
        let mut c = unpack_nibbles(&self.qs);
        unpack_high(self.qh, &mut c);
        from_codes(&c, 0)
    }
    #[inline(always)]
    fn store(&mut self, d: f32, m: f32, q: &[i32; QK]) {
        let c = to_codes(q, 0);
        self.d = F16Le::from_f32(d);
        self.m = F16Le::from_f32(m);
        self.qh = pack_high(&c);
        self.qs = pack_nibbles(&c);
    }
}

impl LegacyBlock for BlockQ8_0 {
    const KIND: Kind = Kind::Symmetric;
    const BITS: u32 = 8;
    const USES_WEIGHTS: bool = false;
    const I8_VALUES: Option<fn(&Self) -> &[i8; QK]> = Some(|b| &b.qs);
    #[inline(always)]
    fn d_f16(&self) -> F16Le {
        self.d
    }
    #[inline(always)]
    fn quants(&self) -> [i32; QK] {
        widen(&self.qs)
    }
    #[inline(always)]
    fn store(&mut self, d: f32, _m: f32, q: &[i32; QK]) {
        self.d = F16Le::from_f32(d);
        self.qs = narrow(q);
    }
}

impl LegacyBlock for BlockQ8_1 {
    const KIND: Kind = Kind::Symmetric;
    const BITS: u32 = 8;
    const USES_WEIGHTS: bool = false;
    const I8_VALUES: Option<fn(&Self) -> &[i8; QK]> = Some(|b| &b.qs);
    #[inline(always)]
    fn d_f16(&self) -> F16Le {
        self.d
    }
    #[inline(always)]
    fn quants(&self) -> [i32; QK] {
        widen(&self.qs)
    }
    /// `s` is the f16 of `Σq · d` with the f32 `d` (ggml's `quantize_row_q8_1_ref`).
    #[inline(always)]
    fn store(&mut self, d: f32, _m: f32, q: &[i32; QK]) {
        let qs = narrow(q);
        let sum: i32 = widen(&qs).iter().sum();
        self.d = F16Le::from_f32(d);
        self.s = F16Le::from_f32(sum as f32 * d);
        self.qs = qs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q5_packing_round_trips_every_code() {
        let q: [i32; QK] = std::array::from_fn(|i| (i as i32) - 16);
        let mut b = BlockQ5_0::zeroed();
        b.store(1.0, 0.0, &q);
        assert_eq!(b.quants(), q);
        // Element 0 is code 0 (q = -16): low nibble 0 and no high bit; element 31 is code 31.
        assert_eq!(b.qs[0] & 0x0F, 0);
        assert_eq!(u32::from_le_bytes(b.qh), 0xFFFF_0000);
    }

    #[test]
    fn q4_nibble_order_matches_ggml() {
        let q: [i32; QK] = std::array::from_fn(|i| if i < 16 { 1 } else { 2 });
        let mut b = BlockQ4_1::zeroed();
        b.store(1.0, 0.0, &q);
        assert!(b.qs.iter().all(|&v| v == 0x21));
    }
}
