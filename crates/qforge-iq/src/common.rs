//! Numeric helpers shared by every I-quant encoder, each a step-for-step port of the ggml
//! helper of the same name (f32 arithmetic in ggml's order of operations). The searches and
//! block preparation ggml shares with the other families (`nearest_int`, `make_qp_quants`,
//! padding, `sigma2`, importance weights, ...) come from `qforge-ggml-search`.

/// Elements per super-block (ggml's `QK_K`).
pub(crate) const QK_K: usize = 256;

/// ggml's `best_index_int8`: index of the entry of the ascending table `val` nearest `x`
/// (the upper one on ties). Always in range, NaN included.
#[inline]
pub(crate) fn best_index_int8(val: &[i8; 16], x: f32) -> usize {
    if x <= val[0] as f32 {
        return 0;
    }
    if x >= val[15] as f32 {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < val[mav] as f32 {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - (val[mu - 1] as f32) < val[mu] as f32 - x { mu - 1 } else { mu }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_index_picks_the_nearest_value() {
        let v = crate::tables::KVALUES_IQ4NL;
        assert_eq!(best_index_int8(&v, -1000.0), 0);
        assert_eq!(best_index_int8(&v, 1000.0), 15);
        assert_eq!(best_index_int8(&v, 0.0), 8);
        assert_eq!(best_index_int8(&v, 7.0), 9); // equidistant from 1 and 13: the upper one
        assert!(best_index_int8(&v, f32::NAN) < 16);
    }
}
