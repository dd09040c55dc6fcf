//! One weight row against several activation rows: a kernel written for a const number of
//! rows `R` (its accumulators in registers, each weight block unpacked once for all `R`) runs
//! over any number of rows, [`MAX_ROWS`] per pass. Every family's multi-row kernel uses this
//! instead of its own `match` on the row count.

/// Activation rows one pass over the weight row serves (the largest `R` instantiated).
pub const MAX_ROWS: usize = 4;

/// A kernel over `R` activation rows at once (`1 ≤ R ≤ MAX_ROWS`), items of type `T` (a
/// row of activation blocks, or a row with its own scale).
pub trait RowKernel<T> {
    /// The result for each of the rows `a`.
    fn rows<const R: usize>(&self, a: [&T; R]) -> [f32; R];
}

/// `out[i]` = the kernel's result for `a[i]`, rows taken [`MAX_ROWS`] at a time (the last
/// pass with the rows that are left).
///
/// # Panics
/// If `a.len() != out.len()`.
pub fn by_rows<T, K: RowKernel<T>>(k: &K, a: &[T], out: &mut [f32]) {
    assert_eq!(a.len(), out.len(), "one output per activation row");
    for (a, out) in a.chunks(MAX_ROWS).zip(out.chunks_mut(MAX_ROWS)) {
        match a {
            [a0] => out.copy_from_slice(&k.rows([a0])),
            [a0, a1] => out.copy_from_slice(&k.rows([a0, a1])),
            [a0, a1, a2] => out.copy_from_slice(&k.rows([a0, a1, a2])),
            [a0, a1, a2, a3] => out.copy_from_slice(&k.rows([a0, a1, a2, a3])),
            _ => unreachable!("chunks of 1..=MAX_ROWS rows"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sums each row, and records which row counts it was called with.
    struct Sum(std::cell::RefCell<Vec<usize>>);

    impl RowKernel<Vec<f32>> for Sum {
        fn rows<const R: usize>(&self, a: [&Vec<f32>; R]) -> [f32; R] {
            self.0.borrow_mut().push(R);
            a.map(|r| r.iter().sum())
        }
    }

    #[test]
    fn every_row_once_in_passes_of_at_most_four() {
        for n in 0..=11 {
            let a: Vec<Vec<f32>> = (0..n).map(|i| vec![i as f32, 0.5]).collect();
            let k = Sum(Default::default());
            let mut out = vec![f32::NAN; n];
            by_rows(&k, &a, &mut out);
            assert_eq!(out, (0..n).map(|i| i as f32 + 0.5).collect::<Vec<_>>());
            let passes = k.0.into_inner();
            assert_eq!(passes.iter().sum::<usize>(), n);
            assert!(passes.iter().all(|&r| (1..=MAX_ROWS).contains(&r)));
            assert_eq!(passes.len(), n.div_ceil(MAX_ROWS));
        }
    }
}
