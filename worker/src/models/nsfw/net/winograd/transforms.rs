//! The transforms of Winograd's two tilings: `G` for the kernels, `Bᵀ` for the input tiles,
//! `Aᵀ` for the products (Lavin and Gray, 2015), each along vectors of channels.

/// The transforms of one tiling. `TILE` is the input tile's side, `OUT + 2`.
pub trait Transforms {
    const OUT: usize;
    const TILE: usize = Self::OUT + 2;
    const POSITIONS: usize = Self::TILE * Self::TILE;
    /// `G`: a kernel's 3 taps to the `TILE` transformed ones.
    const G: &'static [[f32; 3]];
    /// `Bᵀ` along the `TILE` vectors of `d` into `TILE` consecutive vectors of `out`.
    fn input_1d(d: &[&[f32]], out: &mut [f32]);
    /// `Aᵀ` along the `TILE` vectors of `m` into `OUT` consecutive vectors of `out`.
    fn output_1d(m: &[&[f32]], out: &mut [f32]);
}

/// F(2x2, 3x3).
pub struct Two;
/// F(4x4, 3x3).
pub struct Four;

impl Transforms for Two {
    const OUT: usize = 2;
    const G: &'static [[f32; 3]] = &[
        [1.0, 0.0, 0.0],
        [0.5, 0.5, 0.5],
        [0.5, -0.5, 0.5],
        [0.0, 0.0, 1.0],
    ];

    #[inline(always)]
    fn input_1d(d: &[&[f32]], out: &mut [f32]) {
        let &[d0, d1, d2, d3] = d else {
            return;
        };
        let [v0, v1, v2, v3] = split(out);
        let n = v0.len();
        let (d0, d1, d2, d3) = (&d0[..n], &d1[..n], &d2[..n], &d3[..n]);
        let (v1, v2, v3) = (&mut v1[..n], &mut v2[..n], &mut v3[..n]);
        for x in 0..n {
            v0[x] = d0[x] - d2[x];
            v1[x] = d1[x] + d2[x];
            v2[x] = d2[x] - d1[x];
            v3[x] = d1[x] - d3[x];
        }
    }

    #[inline(always)]
    fn output_1d(m: &[&[f32]], out: &mut [f32]) {
        let &[m0, m1, m2, m3] = m else {
            return;
        };
        let [v0, v1] = split(out);
        let n = v0.len();
        let (m0, m1, m2, m3, v1) = (&m0[..n], &m1[..n], &m2[..n], &m3[..n], &mut v1[..n]);
        for x in 0..n {
            v0[x] = m0[x] + m1[x] + m2[x];
            v1[x] = m1[x] - m2[x] - m3[x];
        }
    }
}

impl Transforms for Four {
    const OUT: usize = 4;
    const G: &'static [[f32; 3]] = &[
        [1.0 / 4.0, 0.0, 0.0],
        [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
        [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
        [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
        [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
        [0.0, 0.0, 1.0],
    ];

    #[inline(always)]
    fn input_1d(d: &[&[f32]], out: &mut [f32]) {
        let &[d0, d1, d2, d3, d4, d5] = d else {
            return;
        };
        let [v0, v1, v2, v3, v4, v5] = split(out);
        let n = v0.len();
        let (d0, d1, d2, d3, d4, d5) = (&d0[..n], &d1[..n], &d2[..n], &d3[..n], &d4[..n], &d5[..n]);
        let (v1, v2, v3, v4, v5) = (
            &mut v1[..n],
            &mut v2[..n],
            &mut v3[..n],
            &mut v4[..n],
            &mut v5[..n],
        );
        for x in 0..n {
            v0[x] = 4.0 * d0[x] - 5.0 * d2[x] + d4[x];
            v1[x] = -4.0 * (d1[x] + d2[x]) + d3[x] + d4[x];
            v2[x] = 4.0 * (d1[x] - d2[x]) - d3[x] + d4[x];
            v3[x] = -2.0 * (d1[x] - d3[x]) - d2[x] + d4[x];
            v4[x] = 2.0 * (d1[x] - d3[x]) - d2[x] + d4[x];
            v5[x] = 4.0 * d1[x] - 5.0 * d3[x] + d5[x];
        }
    }

    #[inline(always)]
    fn output_1d(m: &[&[f32]], out: &mut [f32]) {
        let &[m0, m1, m2, m3, m4, m5] = m else {
            return;
        };
        let [v0, v1, v2, v3] = split(out);
        let n = v0.len();
        let (m0, m1, m2, m3, m4, m5) = (&m0[..n], &m1[..n], &m2[..n], &m3[..n], &m4[..n], &m5[..n]);
        let (v1, v2, v3) = (&mut v1[..n], &mut v2[..n], &mut v3[..n]);
        for x in 0..n {
            let (a, b) = (m1[x] + m2[x], m1[x] - m2[x]);
            let (c, d) = (m3[x] + m4[x], m3[x] - m4[x]);
            v0[x] = m0[x] + a + c;
            v1[x] = b + 2.0 * d;
            v2[x] = a + 4.0 * c;
            v3[x] = b + 8.0 * d + m5[x];
        }
    }
}

/// `data` cut into `N` equal consecutive vectors.
#[inline(always)]
fn split<const N: usize>(data: &mut [f32]) -> [&mut [f32]; N] {
    let len = data.len() / N;
    let mut parts = data.chunks_exact_mut(len.max(1));
    std::array::from_fn(|_| parts.next().unwrap_or_default())
}
