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

/// `out[i]` = the kernel's result for item `i` of `flat`, the items being its consecutive
/// runs of `n` elements (weight rows stored one after another), [`MAX_ROWS`] at a time.
///
/// # Panics
/// If `flat.len() != n · out.len()`.
pub fn by_chunks<'a, E, K: RowKernel<&'a [E]>>(k: &K, flat: &'a [E], n: usize, out: &mut [f32]) {
    assert_eq!(Some(flat.len()), n.checked_mul(out.len()), "one output per run of n elements");
    let mut items: [&'a [E]; MAX_ROWS] = [&[]; MAX_ROWS];
    for (i, out) in out.chunks_mut(MAX_ROWS).enumerate() {
        let group = &flat[i * MAX_ROWS * n..][..out.len() * n];
        for (j, item) in items[..out.len()].iter_mut().enumerate() {
            *item = &group[j * n..(j + 1) * n];
        }
        by_rows(k, &items[..out.len()], out);
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

    #[test]
    fn every_run_once_in_passes_of_at_most_four() {
        /// Sums each run of a flat slice.
        struct RunSum;
        impl RowKernel<&[f32]> for RunSum {
            fn rows<const R: usize>(&self, a: [&&[f32]; R]) -> [f32; R] {
                a.map(|r| r.iter().sum())
            }
        }
        for (rows, n) in [(0, 3), (1, 3), (5, 2), (9, 1), (4, 0), (0, 0)] {
            let flat: Vec<f32> = (0..rows * n).map(|i| i as f32).collect();
            let mut out = vec![f32::NAN; rows];
            by_chunks(&RunSum, &flat, n, &mut out);
            let want: Vec<f32> = (0..rows).map(|r| (r * n..(r + 1) * n).map(|i| i as f32).sum()).collect();
            assert_eq!(out, want);
        }
    }
}
