//! How a GPU runner's CPUs are shared out. CPU kernels (CPU C++ extensions) are timed on the
//! host: beside a dozen compilers their timing would be disturbed, and after them they are the
//! run's critical path (five CPU kernels, ~25 s each, after ~90 s of builds). So each CPU lane
//! gets CPUs of its own and the builds and GPU evals keep the rest: the lanes start as soon as
//! their kernels are built, and nothing else runs on their CPUs.

/// Which CPUs each side runs on ([`plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorePlan {
    /// Builds, GPU evals and their processes started ahead.
    pub gpu_side: Vec<usize>,
    /// One set per CPU lane: disjoint from each other and from `gpu_side`.
    pub lanes: Vec<Vec<usize>>,
}

/// Below this many CPUs there are no lanes: one CPU worker on every CPU, after the builds.
pub const MIN_CPUS: usize = 8;

/// The split of `allowed` (the CPUs kernelgate may use) on a runner with `gpus` GPUs and
/// `cpu_kernels` kernels to time on the CPU; `None` when there is nothing to split (no GPU, no
/// CPU kernel, too few CPUs). A lane gets a fifth of the CPUs (2 to 8); the lanes together at
/// most two fifths, never more lanes than CPU kernels.
pub fn plan(allowed: &[usize], gpus: usize, cpu_kernels: usize) -> Option<CorePlan> {
    let n = allowed.len();
    if gpus == 0 || cpu_kernels == 0 || n < MIN_CPUS {
        return None;
    }
    let size = (n / 5).clamp(2, 8);
    let lanes = ((2 * n / 5) / size).clamp(1, cpu_kernels);
    let split = n - lanes * size;
    Some(CorePlan {
        gpu_side: allowed[..split].to_vec(),
        lanes: allowed[split..]
            .chunks(size)
            .map(<[usize]>::to_vec)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(n: usize) -> Vec<usize> {
        (0..n).collect()
    }

    #[test]
    fn sixteen_cpus_and_five_cpu_kernels_get_two_lanes_of_three() {
        let p = plan(&cpus(16), 1, 5).unwrap();
        assert_eq!(p.gpu_side, cpus(10));
        assert_eq!(p.lanes, vec![vec![10, 11, 12], vec![13, 14, 15]]);
    }

    #[test]
    fn lanes_are_disjoint_and_cover_the_allowed_cpus_only() {
        // A runner confined to odd CPUs (a cgroup's cpuset, taskset).
        let allowed: Vec<usize> = (0..64).filter(|c| c % 2 == 1).collect();
        let p = plan(&allowed, 2, 9).unwrap();
        let mut all: Vec<usize> = p.gpu_side.clone();
        for lane in &p.lanes {
            assert_eq!(lane.len(), 6);
            all.extend(lane);
        }
        all.sort_unstable();
        assert_eq!(all, allowed, "every CPU once, none outside the allowed set");
        assert_eq!(p.lanes.len(), 2);
        assert!(p.gpu_side.len() >= allowed.len() / 2);
    }

    #[test]
    fn never_more_lanes_than_cpu_kernels() {
        let p = plan(&cpus(128), 8, 1).unwrap();
        assert_eq!(p.lanes.len(), 1);
        assert_eq!(p.lanes[0].len(), 8, "a lane is at most 8 CPUs");
        assert_eq!(p.gpu_side.len(), 120);
    }

    #[test]
    fn no_split_without_a_gpu_a_cpu_kernel_or_enough_cpus() {
        assert_eq!(
            plan(&cpus(16), 0, 5),
            None,
            "a CPU runner times on every CPU"
        );
        assert_eq!(plan(&cpus(16), 1, 0), None);
        assert_eq!(plan(&cpus(MIN_CPUS - 1), 1, 5), None);
        let small = plan(&cpus(MIN_CPUS), 1, 5).unwrap();
        assert_eq!((small.gpu_side.len(), small.lanes.len()), (6, 1));
    }
}
