use pyo3::prelude::*;

#[pymodule]
fn kernelgate_harness(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
