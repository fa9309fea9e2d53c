//! splitmix64, the one generator of reproducible choices: the planner's kicks
//! (`assign::KickBudget::kicked`) and the benchmark harness's fleets (`crate::bench`, which re-exports it).
//! No platform randomness and no clock, so the same seed draws the same numbers on any machine.

/// splitmix64: a tiny, well-mixed, portable generator (Steele, Lea and Flood 2014).
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform float in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// A uniform number below `n` (modulo bias aside, which no use here minds); `None` when
    /// `n` is 0.
    pub fn below(&mut self, n: usize) -> Option<usize> {
        let n = u64::try_from(n).ok().filter(|&n| n > 0)?;
        usize::try_from(self.next_u64() % n).ok()
    }

    /// One uniform draw: the value of the first threshold it falls below, else `last`.
    pub fn pick<T: Copy>(&mut self, below: &[(f64, T)], last: T) -> T {
        let draw = self.unit();
        below.iter().find(|(threshold, _)| draw < *threshold).map_or(last, |(_, value)| *value)
    }
}
