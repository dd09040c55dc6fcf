//! The quantizer's view of a grid: ggml's `iq2xs_init_impl` / `iq3xs_init_impl` data.
//!
//! The decode tables ([`crate::tables`]) store each grid point as bytes of the decoded
//! magnitudes (e.g. 8, 25, 43 for iq2). The quantizers work with small integer levels
//! instead: level `l` at each position, grid value `2l + 1`, and the point's *key* packs the
//! levels, `bits` bits each. A [`Lattice`] holds, built once per process:
//! * the grid points as `2l + 1` values (ggml's `kgrid_q2xs` / `kgrid_q3xs`),
//! * a map from every key to its grid index or, for keys off the grid, to a list of the
//!   grid points at the `nwant` smallest squared distances (ggml's `kmap` / `kneighbors`),
//!   ordered by (distance, index) exactly as ggml's `qsort` orders them.

use std::sync::OnceLock;

/// Grid points of `G` values each, with ggml's neighbour lists.
pub(crate) struct Lattice<const G: usize> {
    /// Grid point `j` as `2l + 1` values.
    pub grid: Vec<[i8; G]>,
    bits: u32,
    /// Per key: `>= 0` grid index, `< 0` `-(offset + 1)` of its list in `neighbours`.
    map: Vec<i32>,
    /// Lists `[n, j_1, ..., j_n]`.
    neighbours: Vec<u16>,
    /// Built on first use ([`Lattice::neighbour_chunks`]; iq1's search never asks, and its
    /// lattice's would be 11 MiB): per key with a list, the index of its first chunk, and
    /// each list's grid values by position, 8 neighbours a chunk (`chunk[i][k]`: value `i` of
    /// neighbour `8c + k`; the last chunk padded with zeros), what
    /// [`Lattice::best_neighbour`] computes 8 distances at a time from.
    chunks: OnceLock<Chunks<G>>,
}

/// [`Lattice`]'s transposed neighbour lists.
struct Chunks<const G: usize> {
    /// Per key, the index of its list's first chunk in `values`.
    at: Vec<u32>,
    /// The chunks, list after list.
    values: Vec<[[i8; 8]; G]>,
}

impl<const G: usize> Lattice<G> {
    /// Builds the lattice from the grid's levels (`levels[j][i]` in `0..2^bits`), with
    /// `map_size` keys (ggml's `kmap_size`) and `nwant` distance shells per neighbour list.
    /// Compiled for the CPU's SIMD level (the distances to every grid point vectorize there):
    /// iq1_s's lattice, 43692 keys against 2048 points, is most of a quantizer's start-up.
    pub(crate) fn new(levels: &[[u8; G]], bits: u32, map_size: usize, nwant: usize) -> Self {
        qforge_core::cpu::dispatch(
            #[inline(always)]
            || Self::build(levels, bits, map_size, nwant),
        )
    }

    /// The body of [`Lattice::new`].
    #[inline(always)]
    fn build(levels: &[[u8; G]], bits: u32, map_size: usize, nwant: usize) -> Self {
        let grid: Vec<[i8; G]> = levels.iter().map(|l| l.map(|v| 2 * v as i8 + 1)).collect();
        let mut map = vec![-1i32; map_size];
        for (j, l) in levels.iter().enumerate() {
            map[Self::key_of(l, bits)] = j as i32;
        }
        let mask = (1usize << bits) - 1;
        // The grid by position (`cols[i][j]`: value `i` of point `j`), so that the distances
        // of all points to a key are one vectorized pass per position: every squared
        // distance is at most `G·(2^(bits+1) − 2)²` (8·6² or 4·14² here), well inside a `u16`.
        let cols: Vec<Vec<u16>> = (0..G).map(|i| grid.iter().map(|g| g[i] as u16).collect()).collect();
        let mut neighbours = Vec::new();
        let mut dist = vec![0u16; grid.len()];
        let mut shells: Vec<u16> = Vec::with_capacity(nwant);
        #[allow(clippy::needless_range_loop)] // `map` is written at `key` inside the loop
        for key in 0..map_size {
            if map[key] >= 0 {
                continue;
            }
            dist.fill(0);
            for (i, col) in cols.iter().enumerate() {
                let p = (2 * ((key >> (bits as usize * i)) & mask) + 1) as u16;
                for (d, &c) in dist.iter_mut().zip(col) {
                    let diff = c.abs_diff(p);
                    *d += diff * diff;
                }
            }
            // The nwant smallest distinct squared distances, ascending: successive minima.
            shells.clear();
            let mut floor = None;
            while shells.len() < nwant {
                let above = |d: u16| floor.is_none_or(|f| d > f);
                let m = dist.iter().fold(u16::MAX, |m, &d| if above(d) { m.min(d) } else { m });
                if m == u16::MAX {
                    break; // fewer distinct distances than nwant (none reaches u16::MAX)
                }
                shells.push(m);
                floor = Some(m);
            }
            let start = neighbours.len();
            map[key] = -(start as i32 + 1);
            neighbours.push(0);
            for &s in &shells {
                // The points at distance `s`, in index order: a bit mask per 32 distances
                // (one vector compare), then its set bits (few: a shell holds a handful).
                for (c, chunk) in dist.chunks(32).enumerate() {
                    let mut m = 0u32;
                    for (k, &d) in chunk.iter().enumerate() {
                        m |= u32::from(d == s) << k;
                    }
                    while m != 0 {
                        neighbours.push((32 * c + m.trailing_zeros() as usize) as u16);
                        m &= m - 1;
                    }
                }
            }
            neighbours[start] = (neighbours.len() - start - 1) as u16;
        }
        Lattice { grid, bits, map, neighbours, chunks: OnceLock::new() }
    }

    /// [`Lattice::chunks`]' contents.
    fn build_chunks(&self) -> Chunks<G> {
        let (mut chunk_at, mut chunks) = (vec![0u32; self.map.len()], Vec::new());
        for (key, at) in chunk_at.iter_mut().enumerate() {
            *at = chunks.len() as u32;
            for eight in self.neighbours(key).chunks(8) {
                let value = |i: usize, k: usize| eight.get(k).map_or(0, |&j| self.grid[j as usize][i]);
                chunks.push(std::array::from_fn(|i| std::array::from_fn(|k| value(i, k))));
            }
        }
        Chunks { at: chunk_at, values: chunks }
    }

    /// The key of a point given by its levels.
    #[inline(always)]
    pub(crate) fn key_of(levels: &[u8], bits: u32) -> usize {
        levels.iter().enumerate().fold(0usize, |k, (i, &l)| k | (l as usize) << (bits as usize * i))
    }

    /// The key of a point given by `i8` levels (each in `0..2^bits`).
    #[inline(always)]
    pub(crate) fn key(&self, levels: &[i8]) -> usize {
        levels.iter().enumerate().fold(0usize, |k, (i, &l)| k | (l as u8 as usize) << (self.bits as usize * i))
    }

    /// Grid index of `key`, if the key is a grid point.
    #[inline(always)]
    pub(crate) fn index(&self, key: usize) -> Option<usize> {
        match self.map.get(key) {
            Some(&m) if m >= 0 => Some(m as usize),
            _ => None,
        }
    }

    /// The neighbour list of an off-grid `key` (empty for grid points and impossible keys).
    #[inline(always)]
    pub(crate) fn neighbours(&self, key: usize) -> &[u16] {
        match self.map.get(key) {
            Some(&m) if m < 0 => {
                let start = (-(m + 1)) as usize;
                let n = self.neighbours[start] as usize;
                &self.neighbours[start + 1..start + 1 + n]
            }
            _ => &[],
        }
    }

    /// The neighbour list of an off-grid `key` and its grid values by position, 8 neighbours
    /// a chunk (`chunk[i][k]`: value `i` of neighbour `8c + k`, zeros past the list's end).
    #[inline(always)]
    pub(crate) fn neighbour_chunks(&self, key: usize) -> (&[u16], &[[[i8; 8]; G]]) {
        let list = self.neighbours(key);
        let chunks = self.chunks.get_or_init(|| self.build_chunks());
        let at = chunks.at.get(key).map_or(0, |&c| c as usize);
        (list, chunks.values.get(at..at + list.len().div_ceil(8)).unwrap_or(&[]))
    }

    /// Writes the levels `(g - 1) / 2` of grid point `j` to `l`.
    #[inline(always)]
    pub(crate) fn levels_into(&self, j: usize, l: &mut [i8]) {
        for (o, &g) in l.iter_mut().zip(&self.grid[j]) {
            *o = (g - 1) / 2;
        }
    }

    /// ggml's `iq2_find_best_neighbour` / `iq3_find_best_neighbour`: among the neighbours of
    /// the off-grid `key`, the grid point minimizing `sum w (scale * g - x)^2` (the first one
    /// on ties). Writes its levels to `l` and returns its index. Where ggml would abort (no
    /// finite distance, only for non-finite intermediate values) it takes the first neighbour.
    pub(crate) fn best_neighbour(&self, key: usize, x: &[f32], w: &[f32], scale: f32, l: &mut [i8]) -> usize {
        let (list, chunks) = self.neighbour_chunks(key);
        let first = list.first().map_or(0, |&j| j as usize);
        // Compiled for the CPU's SIMD level: the plain build's SSE2 widens the `i8` values
        // in three instructions and takes the eight lanes in two halves.
        let best = qforge_core::cpu::dispatch(
            #[inline(always)]
            || {
                let mut best = (f32::MAX, first);
                for (chunk, eight) in chunks.iter().zip(list.chunks(8)) {
                    // Eight distances at once, each summed over the positions in order: the
                    // same operations per lane as one neighbour at a time, so the same bits (a
                    // loop over a fixed array, which LLVM vectorizes).
                    let mut d2 = [0.0f32; 8];
                    for ((g, &xi), &wi) in chunk.iter().zip(x).zip(w) {
                        for (d, &g) in d2.iter_mut().zip(g) {
                            let diff = scale * g as f32 - xi;
                            *d += wi * diff * diff;
                        }
                    }
                    for (&d, &j) in d2.iter().zip(eight) {
                        if d < best.0 {
                            best = (d, j as usize);
                        }
                    }
                }
                best
            },
        );
        self.levels_into(best.1, l);
        best.1
    }

    /// The grid index of the levels `l`; for a point off the grid (only reachable from
    /// non-finite intermediate values, where ggml aborts) its first neighbour, whose levels
    /// then replace `l`.
    #[inline]
    pub(crate) fn index_or_nearest(&self, l: &mut [i8]) -> usize {
        let key = self.key(l);
        if let Some(j) = self.index(key) {
            return j;
        }
        let j = self.neighbours(key).first().map_or(0, |&j| j as usize);
        self.levels_into(j, l);
        j
    }
}

/// Levels of a decode-table grid: byte `i` of each word mapped through `level`.
pub(crate) fn levels_of<const G: usize>(words: impl Iterator<Item = u64>, level: impl Fn(u8) -> u8) -> Vec<[u8; G]> {
    words.map(|w| std::array::from_fn(|i| level(crate::tables::grid_byte(w, i)))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::*;

    /// ggml's neighbour search as it is written (every distance into the shell list, no early
    /// exit), for keys `0..map_size`: the map and lists [`Lattice::new`] must give.
    fn plain_search<const G: usize>(
        levels: &[[u8; G]],
        bits: u32,
        map_size: usize,
        nwant: usize,
    ) -> (Vec<i32>, Vec<u16>) {
        let grid: Vec<[i32; G]> = levels.iter().map(|l| l.map(|v| 2 * i32::from(v) + 1)).collect();
        let mut map = vec![-1i32; map_size];
        for (j, l) in levels.iter().enumerate() {
            map[Lattice::<G>::key_of(l, bits)] = j as i32;
        }
        let mut lists = Vec::new();
        for (key, m) in map.iter_mut().enumerate() {
            if *m >= 0 {
                continue;
            }
            let pos: Vec<i32> =
                (0..G).map(|i| 2 * ((key >> (bits as usize * i)) & ((1 << bits) - 1)) as i32 + 1).collect();
            let dist: Vec<i32> = grid.iter().map(|g| (0..G).map(|i| (g[i] - pos[i]).pow(2)).sum()).collect();
            let mut shells = dist.clone();
            shells.sort_unstable();
            shells.dedup();
            shells.truncate(nwant);
            *m = -(lists.len() as i32 + 1);
            let dist = &dist;
            let list: Vec<u16> =
                shells.iter().flat_map(|&s| (0..dist.len()).filter(move |&j| dist[j] == s)).map(|j| j as u16).collect();
            lists.push(list.len() as u16);
            lists.extend(list);
        }
        (map, lists)
    }

    /// The fast build gives the plain search's map and neighbour lists (iq2_xs's grid of 8
    /// values, iq3_s's of 4, two shell counts).
    #[test]
    fn the_build_is_the_plain_search() {
        let iq2 = levels_of::<8>(IQ2XS_GRID.iter().copied(), |b| b.saturating_sub(8) / 17);
        let iq3 = levels_of::<4>(IQ3S_GRID.iter().map(|&w| u64::from(w)), |b| b / 2);
        for nwant in [1, 2, 3] {
            let lat = Lattice::new(&iq2, 2, 43692, nwant);
            assert_eq!((lat.map, lat.neighbours), plain_search(&iq2, 2, 43692, nwant), "iq2_xs, {nwant} shells");
            let lat = Lattice::new(&iq3, 3, 4096, nwant);
            assert_eq!((lat.map, lat.neighbours), plain_search(&iq3, 3, 4096, nwant), "iq3_s, {nwant} shells");
        }
    }

    /// Each list's chunks hold its neighbours' grid values by position, zeros past its end.
    #[test]
    fn chunks_transpose_the_lists() {
        let iq2 = levels_of::<8>(IQ2XS_GRID.iter().copied(), |b| b.saturating_sub(8) / 17);
        let lat = Lattice::new(&iq2, 2, 43692, 2);
        let mut checked = 0;
        for key in (0..43692).step_by(7) {
            let (list, chunks) = lat.neighbour_chunks(key);
            assert_eq!(chunks.len(), list.len().div_ceil(8), "key {key}");
            for (j, &n) in list.iter().enumerate() {
                for (row, &g) in chunks[j / 8].iter().zip(&lat.grid[n as usize]) {
                    assert_eq!(row[j % 8], g, "key {key}");
                }
            }
            for j in list.len()..list.len().next_multiple_of(8) {
                assert!((0..8).all(|i| chunks[j / 8][i][j % 8] == 0), "key {key} padding");
            }
            checked += usize::from(!list.is_empty());
        }
        assert!(checked > 1000, "{checked} lists");
    }

    fn keys<const G: usize>(levels: &[[u8; G]], bits: u32) -> Vec<usize> {
        levels.iter().map(|l| Lattice::<G>::key_of(l, bits)).collect()
    }

    /// The quantizer grids derived from the decode tables are ggml's `kgrid_*` tables of
    /// `iq2xs_init_impl` / `iq3xs_init_impl` (first and last entries as printed in
    /// ggml-quants.c; every key is distinct and ascending there, as here).
    #[test]
    fn derived_grids_are_ggmls_kgrid_tables() {
        let iq2 = |b: u8| b.saturating_sub(8) / 17;
        let cases: [(Vec<usize>, &[usize], &[usize]); 6] = [
            (
                keys(&levels_of::<8>(IQ2XXS_GRID.iter().copied(), iq2), 2),
                &[0, 2, 5, 8, 10, 17, 20, 32],
                &[42008, 43088, 43268],
            ),
            (
                keys(&levels_of::<8>(IQ2XS_GRID.iter().copied(), iq2), 2),
                &[0, 2, 5, 8, 10, 17, 20, 22],
                &[43562, 43665, 43690],
            ),
            (
                keys(&levels_of::<8>(IQ2S_GRID.iter().copied(), iq2), 2),
                &[0, 2, 5, 8, 10, 17, 20, 22, 25, 32],
                &[43560, 43656, 43690],
            ),
            (
                keys(&levels_of::<8>(IQ1S_GRID.iter().copied(), |b| (b as i8 + 1) as u8), 2),
                &[0, 2, 5, 8, 10, 17, 21, 32],
                &[43682, 43688, 43690],
            ),
            (
                keys(&levels_of::<4>(IQ3XXS_GRID.iter().map(|&w| w as u64), |b| b / 8), 3),
                &[0, 2, 4, 9, 11, 15, 16, 18],
                &[3906, 3924, 3992],
            ),
            (
                keys(&levels_of::<4>(IQ3S_GRID.iter().map(|&w| w as u64), |b| b / 2), 3),
                &[0, 1, 2, 5, 7, 8, 9, 10],
                &[3970, 3993, 4032],
            ),
        ];
        for (k, head, tail) in cases {
            assert_eq!(&k[..head.len()], head);
            assert_eq!(&k[k.len() - tail.len()..], tail);
            assert!(k.windows(2).all(|w| w[0] < w[1]), "keys ascending and distinct");
        }
    }

    /// Neighbour lists: every off-grid key of a small lattice lists exactly the grid points in
    /// its `nwant` nearest distance shells, ordered by (distance, index).
    #[test]
    fn neighbour_lists_follow_ggmls_order() {
        let levels = levels_of::<4>(IQ3XXS_GRID.iter().map(|&w| w as u64), |b| b / 8);
        let lat = Lattice::<4>::new(&levels, 3, 4096, 2);
        let mut off = 0;
        for key in 0..4096usize {
            if lat.index(key).is_some() {
                assert!(lat.neighbours(key).is_empty());
                continue;
            }
            off += 1;
            let pos: [i32; 4] = std::array::from_fn(|i| 2 * ((key >> (3 * i)) & 7) as i32 + 1);
            let d2 = |j: usize| (0..4).map(|i| (lat.grid[j][i] as i32 - pos[i]).pow(2)).sum::<i32>();
            let mut all: Vec<(i32, usize)> = (0..lat.grid.len()).map(|j| (d2(j), j)).collect();
            all.sort();
            let mut shells: Vec<i32> = all.iter().map(|p| p.0).collect();
            shells.dedup();
            let want: Vec<u16> = all.iter().filter(|p| p.0 <= shells[1]).map(|p| p.1 as u16).collect();
            assert_eq!(lat.neighbours(key), &want[..], "key {key}");
        }
        assert_eq!(off, 4096 - 256);
    }
}
