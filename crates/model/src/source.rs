//! Reading a kernel or problem file as text: a file that is unreadable or not UTF-8 is a
//! finding on that file (its own row), never an error that stops a whole run.

use std::path::Path;

/// Why a file could not be read as UTF-8 text.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot read this file ({0}): check that it exists and that the runner may read it")]
    Unreadable(std::io::Error),
    #[error(
        "this file is not UTF-8 (byte 0x{byte:02x} at line {line}, column {column}): Python \
         cannot import it; save it as UTF-8"
    )]
    NotUtf8 { line: u32, column: u32, byte: u8 },
}

impl SourceError {
    /// 1-based line and column of the problem (1:1 for an unreadable file).
    pub fn position(&self) -> (u32, u32) {
        match self {
            SourceError::Unreadable(_) => (1, 1),
            SourceError::NotUtf8 { line, column, .. } => (*line, *column),
        }
    }
}

/// The file's text, or why it has none.
pub fn read_source(path: &Path) -> Result<String, SourceError> {
    let bytes = std::fs::read(path).map_err(SourceError::Unreadable)?;
    decode(bytes)
}

/// `bytes` as UTF-8, or where the first invalid byte is.
pub fn decode(bytes: Vec<u8>) -> Result<String, SourceError> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let before = &bytes[..at];
        let line = before.iter().filter(|&&b| b == b'\n').count() as u32 + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count() as u32
            + 1;
        SourceError::NotUtf8 {
            line,
            column,
            byte: bytes[at],
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_byte_is_located_by_line_and_column() {
        let err = decode(b"import torch\n# \xc3\xa9 \xff x\n".to_vec()).unwrap_err();
        assert_eq!(err.position(), (2, 5));
        assert!(
            err.to_string().contains("byte 0xff at line 2, column 5"),
            "{err}"
        );
        assert_eq!(decode(b"ok\n".to_vec()).unwrap(), "ok\n");
    }
}
