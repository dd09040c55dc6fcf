//! One source for a block layout in Rust and in the CUDA headers: a block struct is declared
//! once, with [`c_block!`](crate::c_block), which defines the `#[repr(C)]` Rust struct and
//! its [`CLayout`] — the same fields as C sees them, each an array of `uint8_t` / `int8_t`
//! (the device code reads multi-byte fields with its little-endian load helpers). The CUDA
//! build renders every block format's layout with [`c_struct`] into the generated prelude its
//! header includes, so the device struct is generated from the Rust one, never written twice.

use crate::le::{F16Le, F32Le, I16Le, U16Le, U32Le};

/// A field type as C sees it: `COUNT` elements of the C type `C`.
pub trait CType {
    /// The C element type (`uint8_t` or `int8_t`).
    const C: &'static str;
    /// How many of them.
    const COUNT: usize;
    /// Whether C declares it as an array (`uint8_t d[2]`) rather than a scalar (`uint8_t e`).
    const ARRAY: bool = true;
}

impl CType for u8 {
    const C: &'static str = "uint8_t";
    const COUNT: usize = 1;
    const ARRAY: bool = false;
}

impl CType for i8 {
    const C: &'static str = "int8_t";
    const COUNT: usize = 1;
    const ARRAY: bool = false;
}

macro_rules! le_bytes {
    ($($t:ty),*) => {$(
        impl CType for $t {
            const C: &'static str = "uint8_t";
            const COUNT: usize = std::mem::size_of::<$t>();
        }
    )*};
}
le_bytes!(F16Le, F32Le, I16Le, U16Le, U32Le);

impl<T: CType, const N: usize> CType for [T; N] {
    const C: &'static str = T::C;
    const COUNT: usize = N * T::COUNT;
}

/// One field of a block as C sees it: `ctype name[count];` (or `ctype name;`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CField {
    /// The field's name (the Rust field's).
    pub name: &'static str,
    /// The C element type (`uint8_t` or `int8_t`).
    pub ctype: &'static str,
    /// Elements (= bytes) in the field.
    pub count: usize,
    /// An array (`[count]`), or one scalar (`count == 1`).
    pub array: bool,
}

/// A block's fields in order, as C sees them (implemented by [`c_block!`](crate::c_block)).
pub trait CLayout {
    /// The fields, in declaration order; their counts add up to the block's size.
    const FIELDS: &'static [CField];
}

/// A bare array block (`[u8; N]`, `[i8; N]`): one field, `raw`.
impl<T: CType, const N: usize> CLayout for [T; N] {
    const FIELDS: &'static [CField] = &[CField { name: "raw", ctype: T::C, count: N * T::COUNT, array: true }];
}

/// The C definition of a block with `fields`: `struct name { uint8_t d[2]; uint8_t qs[16]; };`.
pub fn c_struct(name: &str, fields: &[CField]) -> String {
    let body: String = fields
        .iter()
        .map(|f| {
            if f.array { format!(" {} {}[{}];", f.ctype, f.name, f.count) } else { format!(" {} {};", f.ctype, f.name) }
        })
        .collect();
    format!("struct {name} {{{body} }};")
}

/// Declares a block struct once for Rust and C: the struct exactly as written (attributes,
/// docs and all; give it `#[repr(C)]`), plus its [`CLayout`]. Fields must be of types
/// implementing [`CType`] (bytes, `i8`, the `le` wrappers, arrays of them).
///
/// ```
/// qforge_core::c_block! {
///     /// A block.
///     #[repr(C)]
///     #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
///     pub struct Block {
///         /// The scale.
///         pub d: qforge_core::le::F16Le,
///         /// The codes.
///         pub qs: [u8; 16],
///     }
/// }
/// use qforge_core::CLayout;
/// assert_eq!(qforge_core::c_struct("b", Block::FIELDS), "struct b { uint8_t d[2]; uint8_t qs[16]; };");
/// ```
#[macro_export]
macro_rules! c_block {
    (
        $(#[$m:meta])*
        $vis:vis struct $name:ident {
            $($(#[$fm:meta])* $fvis:vis $field:ident : $ty:ty),* $(,)?
        }
    ) => {
        $(#[$m])*
        $vis struct $name {
            $($(#[$fm])* $fvis $field: $ty),*
        }

        impl $crate::CLayout for $name {
            const FIELDS: &'static [$crate::CField] = &[$($crate::CField {
                name: stringify!($field),
                ctype: <$ty as $crate::CType>::C,
                count: <$ty as $crate::CType>::COUNT,
                array: <$ty as $crate::CType>::ARRAY,
            }),*];
        }
    };
}
