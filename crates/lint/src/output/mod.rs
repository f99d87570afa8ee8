//! Rendering findings: human (rustc/ruff style), json, github workflow commands.
