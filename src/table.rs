//! The listing commands' tables (`problems`, `kernels`): left-aligned columns separated by two
//! spaces, one owner so every table lines up the same way.

/// `header` and `rows` as lines of aligned columns, each line ending in a newline; the last
/// column is not padded.
pub fn render<'a>(header: &[&str], rows: impl Iterator<Item = &'a [String]> + Clone) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows.clone() {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut table = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        table.push_str(out.trim_end());
        table.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    table
}
