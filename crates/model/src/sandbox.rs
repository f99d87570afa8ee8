//! How one candidate's child process was confined: the level the launcher reached, recorded on
//! every row and on the run. JSON holds its display form (`full`, `partial (missing: ...)`,
//! `unavailable (...)`, `off`), which [`SandboxLevel::parse`] reads back.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// How well one job's child was confined.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SandboxLevel {
    Full,
    /// Confined, with the listed layers missing.
    Partial(String),
    /// Not confined, and why.
    Unavailable(String),
    /// Switched off on purpose.
    Off,
}

impl SandboxLevel {
    /// The level a display form names; text of no known form is an unavailable sandbox with
    /// that text as its reason (a report from another version stays readable and never reads
    /// as confined).
    pub fn parse(text: &str) -> SandboxLevel {
        let text = text.trim();
        let inner = |prefix: &str| {
            text.strip_prefix(prefix)
                .and_then(|r| r.strip_prefix(" ("))
                .and_then(|r| r.strip_suffix(')'))
                .map(str::to_string)
        };
        match text {
            "full" => SandboxLevel::Full,
            "off" => SandboxLevel::Off,
            _ => inner("partial")
                .map(SandboxLevel::Partial)
                .or_else(|| inner("unavailable").map(SandboxLevel::Unavailable))
                .unwrap_or_else(|| SandboxLevel::Unavailable(text.to_string())),
        }
    }

    pub fn is_full(&self) -> bool {
        *self == SandboxLevel::Full
    }
}

impl fmt::Display for SandboxLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxLevel::Full => f.write_str("full"),
            SandboxLevel::Partial(m) => write!(f, "partial ({m})"),
            SandboxLevel::Unavailable(r) => write!(f, "unavailable ({r})"),
            SandboxLevel::Off => f.write_str("off"),
        }
    }
}

impl Serialize for SandboxLevel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SandboxLevel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(SandboxLevel::parse(&String::deserialize(d)?))
    }
}

/// The distinct levels of a run's jobs, in the order first seen; JSON joins them with `; `
/// (`full; off`), as reports have always held them.
pub mod joined {
    use super::SandboxLevel;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(levels: &[SandboxLevel], s: S) -> Result<S::Ok, S::Error> {
        let text: Vec<String> = levels.iter().map(ToString::to_string).collect();
        s.serialize_str(&text.join("; "))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SandboxLevel>, D::Error> {
        let text = Option::<String>::deserialize(d)?.unwrap_or_default();
        Ok(text
            .split("; ")
            .filter(|l| !l.trim().is_empty())
            .map(SandboxLevel::parse)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_reads_back_from_its_display_form() {
        for level in [
            SandboxLevel::Full,
            SandboxLevel::Off,
            SandboxLevel::Partial("missing: seccomp".into()),
            SandboxLevel::Unavailable("no Landlock (kernel 5.10)".into()),
        ] {
            assert_eq!(SandboxLevel::parse(&level.to_string()), level);
            let json = serde_json::to_string(&level).unwrap();
            assert_eq!(serde_json::from_str::<SandboxLevel>(&json).unwrap(), level);
        }
    }

    #[test]
    fn unknown_text_never_reads_as_confined() {
        assert_eq!(
            SandboxLevel::parse("sealed"),
            SandboxLevel::Unavailable("sealed".into())
        );
    }
}
