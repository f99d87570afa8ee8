//! `--shard i/n`: a deterministic split of the plan across the runners of a workflow matrix.
//! Every shard computes the same sorted plan from git, so shard `i` takes items `i-1, i-1+n, ...`:
//! balanced, disjoint, and together the whole plan.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based.
    pub index: u32,
    pub count: u32,
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err =
            || format!("invalid shard `{s}`: expected i/n with 1 <= i <= n, e.g. --shard 2/4");
        let (i, n) = s.split_once('/').ok_or_else(err)?;
        let (index, count): (u32, u32) = (
            i.trim().parse().map_err(|_| err())?,
            n.trim().parse().map_err(|_| err())?,
        );
        if index == 0 || count == 0 || index > count {
            return Err(err());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Keeps this shard's items of a list sorted by `key` (sorted here, so callers cannot forget).
    pub fn select<T>(&self, mut items: Vec<T>, key: impl Fn(&T) -> &str) -> Vec<T> {
        items.sort_by(|a, b| key(a).cmp(key(b)));
        items
            .into_iter()
            .enumerate()
            .filter(|(i, _)| (*i as u32) % self.count == self.index - 1)
            .map(|(_, t)| t)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_plan() {
        let items: Vec<String> = (0..23)
            .map(|i| format!("kernels/level1/{i}_K.py"))
            .collect();
        for n in 1..=5u32 {
            let mut seen: Vec<String> = Vec::new();
            let mut sizes = Vec::new();
            for i in 1..=n {
                // Shards see the plan in different orders and still agree.
                let mut shuffled = items.clone();
                shuffled.rotate_left(i as usize * 3 % items.len());
                let part = Shard { index: i, count: n }.select(shuffled, |s| s.as_str());
                sizes.push(part.len());
                seen.extend(part);
            }
            seen.sort();
            let mut all = items.clone();
            all.sort();
            assert_eq!(
                seen, all,
                "n={n}: shards must cover every item exactly once"
            );
            assert!(
                sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
                "n={n}: balanced {sizes:?}"
            );
        }
    }

    #[test]
    fn parses_and_rejects() {
        assert_eq!(
            "2/4".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 4 }
        );
        for bad in ["0/4", "5/4", "1/0", "x/2", "3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
