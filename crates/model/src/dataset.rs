//! Where problems come from: a KernelBench-format directory, the Hugging Face dataset
//! (`hf:ScalingIntelligence/KernelBench`, fetched over the hub's HTTP API and cached), or a
//! local export of it (`.parquet`, `.jsonl`). Rows carry `code`, `level`, `name`, `problem_id`
//! and become the same [`Problem`]s, with the same hashes, as the files.

use crate::config::join_repo;
use crate::problem::{parse_file_name, Problem, ProblemError, ProblemSet};
use std::fmt;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default hub; `HF_ENDPOINT` overrides it (as in the Hugging Face tools).
pub const HF_ENDPOINT: &str = "https://huggingface.co";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatasetSpec {
    Dir(PathBuf),
    /// `hf:<owner>/<name>`
    HuggingFace(String),
    Parquet(PathBuf),
    Jsonl(PathBuf),
}

impl DatasetSpec {
    /// `hf:owner/name`, `*.parquet`, `*.jsonl` / `*.ndjson`, anything else is a directory.
    pub fn parse(s: &str) -> Result<DatasetSpec, String> {
        if let Some(repo) = s.strip_prefix("hf:") {
            let ok = repo.split('/').count() == 2
                && repo.split('/').all(|p| {
                    !p.is_empty()
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                });
            if !ok {
                return Err(format!(
                    "`{s}` is not a Hugging Face dataset: expected hf:<owner>/<name>"
                ));
            }
            return Ok(DatasetSpec::HuggingFace(repo.to_string()));
        }
        if s.is_empty() {
            return Err("empty dataset".into());
        }
        let lower = s.to_ascii_lowercase();
        Ok(if lower.ends_with(".parquet") {
            DatasetSpec::Parquet(PathBuf::from(s))
        } else if lower.ends_with(".jsonl") || lower.ends_with(".ndjson") {
            DatasetSpec::Jsonl(PathBuf::from(s))
        } else {
            DatasetSpec::Dir(PathBuf::from(s))
        })
    }

    /// Resolve relative file and directory paths against `root`.
    pub fn relative_to(self, root: &Path) -> DatasetSpec {
        match self {
            DatasetSpec::Dir(p) => DatasetSpec::Dir(join_repo(root, p)),
            DatasetSpec::Parquet(p) => DatasetSpec::Parquet(join_repo(root, p)),
            DatasetSpec::Jsonl(p) => DatasetSpec::Jsonl(join_repo(root, p)),
            hf => hf,
        }
    }

    /// Read the problems; `hf:` datasets are fetched once and then read from the cache.
    pub fn load(&self) -> Result<ProblemSet, DatasetError> {
        match self {
            DatasetSpec::Dir(root) => Ok(ProblemSet::load(root)?),
            DatasetSpec::Parquet(p) => rows_to_set(read_parquet(p)?, p.display().to_string()),
            DatasetSpec::Jsonl(p) => rows_to_set(read_jsonl(p)?, p.display().to_string()),
            DatasetSpec::HuggingFace(repo) => {
                let files = fetch_hf(repo, &cache_dir(), false)?;
                let mut rows = Vec::new();
                for f in &files {
                    rows.extend(read_parquet(f)?);
                }
                rows_to_set(rows, format!("hf:{repo}"))
            }
        }
    }
}

impl fmt::Display for DatasetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatasetSpec::Dir(p) | DatasetSpec::Parquet(p) | DatasetSpec::Jsonl(p) => {
                write!(f, "{}", p.display())
            }
            DatasetSpec::HuggingFace(r) => write!(f, "hf:{r}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error(transparent)]
    Problems(#[from] ProblemError),
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a readable parquet file: {message}\n  help: export the dataset with `datasets`' to_parquet or use a .jsonl file", path.display())]
    Parquet { path: PathBuf, message: String },
    #[error("{}:{line}: {message}\n  help: every row needs `code` (string), `level`, `problem_id` (integers) and `name` (\"<id>_<Name>.py\")", path.display())]
    Row {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("fetching {url}: {message}\n  help: check the network, or download the dataset's parquet files and pass --dataset FILE.parquet")]
    Fetch { url: String, message: String },
}

/// One dataset row, as in the KernelBench Hugging Face dataset.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Row {
    pub code: String,
    pub level: u32,
    /// `19_ReLU.py`
    pub name: String,
    pub problem_id: u32,
}

fn rows_to_set(rows: Vec<(usize, Row)>, origin: String) -> Result<ProblemSet, DatasetError> {
    let mut problems = Vec::with_capacity(rows.len());
    for (line, row) in rows {
        let name = match parse_file_name(&row.name) {
            Some((_, name)) => name,
            // Tolerate a bare name: the id comes from problem_id.
            None if !row.name.is_empty() => row.name.trim_end_matches(".py").to_string(),
            None => {
                return Err(DatasetError::Row {
                    path: PathBuf::from(&origin),
                    line,
                    message: "empty `name`".into(),
                })
            }
        };
        let path = PathBuf::from(format!("level{}/{}_{}.py", row.level, row.problem_id, name));
        problems.push(Problem::new(
            row.level,
            row.problem_id,
            &name,
            path,
            row.code,
        ));
    }
    Ok(ProblemSet::from_problems(problems, origin)?)
}

/// Rows of a JSONL export, with their 1-based line numbers.
pub fn read_jsonl(path: &Path) -> Result<Vec<(usize, Row)>, DatasetError> {
    let io = |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut rows = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        let row: Row = serde_json::from_str(&line).map_err(|e| DatasetError::Row {
            path: path.to_path_buf(),
            line: i + 1,
            message: e.to_string(),
        })?;
        rows.push((i + 1, row));
    }
    Ok(rows)
}

/// Rows of a parquet file (numbered from 1 in file order for messages).
pub fn read_parquet(path: &Path) -> Result<Vec<(usize, Row)>, DatasetError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let perr = |e: parquet::errors::ParquetError| DatasetError::Parquet {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(|source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let reader = SerializedFileReader::new(file).map_err(perr)?;
    let mut rows = Vec::new();
    for (i, row) in reader.get_row_iter(None).map_err(perr)?.enumerate() {
        let row = row.map_err(perr)?;
        let (mut code, mut level, mut name, mut pid) = (None, None, None, None);
        for (col, field) in row.get_column_iter() {
            let text = match field {
                Field::Str(s) => Some(s.clone()),
                Field::Bytes(b) => b.as_utf8().ok().map(str::to_string),
                _ => None,
            };
            let int = match field {
                Field::Byte(v) => Some(*v as i64),
                Field::Short(v) => Some(*v as i64),
                Field::Int(v) => Some(*v as i64),
                Field::Long(v) => Some(*v),
                Field::UByte(v) => Some(*v as i64),
                Field::UShort(v) => Some(*v as i64),
                Field::UInt(v) => Some(*v as i64),
                Field::ULong(v) => i64::try_from(*v).ok(),
                _ => None,
            };
            match col.as_str() {
                "code" => code = text,
                "name" => name = text,
                "level" => level = int.and_then(|v| u32::try_from(v).ok()),
                "problem_id" => pid = int.and_then(|v| u32::try_from(v).ok()),
                _ => {}
            }
        }
        let missing = |what: &str| DatasetError::Row {
            path: path.to_path_buf(),
            line: i + 1,
            message: format!("row {} has no usable `{what}` column", i + 1),
        };
        rows.push((
            i + 1,
            Row {
                code: code.ok_or_else(|| missing("code"))?,
                level: level.ok_or_else(|| missing("level"))?,
                name: name.ok_or_else(|| missing("name"))?,
                problem_id: pid.ok_or_else(|| missing("problem_id"))?,
            },
        ));
    }
    Ok(rows)
}

/// `$XDG_CACHE_HOME/kernelgate`, else `~/.cache/kernelgate`, else a temp directory.
pub fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("kernelgate")
}

/// Download the parquet files of Hugging Face dataset `repo` into
/// `<cache>/hf/<owner>__<name>/<config>/<split>/<n>.parquet` and return their paths.
/// A complete earlier download (its `manifest.json`) is reused unless `refresh`.
pub fn fetch_hf(repo: &str, cache: &Path, refresh: bool) -> Result<Vec<PathBuf>, DatasetError> {
    let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| HF_ENDPOINT.to_string());
    fetch_hf_from(&endpoint, repo, cache, refresh)
}

/// [`fetch_hf`] against an explicit hub endpoint (`https://huggingface.co` or a mirror).
pub fn fetch_hf_from(
    endpoint: &str,
    repo: &str,
    cache: &Path,
    refresh: bool,
) -> Result<Vec<PathBuf>, DatasetError> {
    let dir = cache.join("hf").join(repo.replace('/', "__"));
    let manifest = dir.join("manifest.json");
    if !refresh {
        if let Ok(text) = std::fs::read_to_string(&manifest) {
            if let Ok(rel) = serde_json::from_str::<Vec<String>>(&text) {
                let files: Vec<PathBuf> = rel.iter().map(|r| dir.join(r)).collect();
                if files.iter().all(|f| f.is_file()) {
                    return Ok(files);
                }
            }
        }
    }
    let endpoint = endpoint.trim_end_matches('/');
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(300)))
        .build()
        .into();
    let token = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty());
    let get = |url: &str| -> Result<Vec<u8>, DatasetError> {
        let ferr = |message: String| DatasetError::Fetch {
            url: url.to_string(),
            message,
        };
        let mut req = agent.get(url);
        if let Some(t) = &token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let mut resp = req.call().map_err(|e| ferr(e.to_string()))?;
        let mut buf = Vec::new();
        resp.body_mut()
            .as_reader()
            .read_to_end(&mut buf)
            .map_err(|e| ferr(e.to_string()))?;
        Ok(buf)
    };
    // {"default": {"level_1": ["https://.../0.parquet", ...], ...}}
    let list_url = format!("{endpoint}/api/datasets/{repo}/parquet");
    let listing: serde_json::Value =
        serde_json::from_slice(&get(&list_url)?).map_err(|e| DatasetError::Fetch {
            url: list_url.clone(),
            message: format!("unexpected answer: {e}"),
        })?;
    let mut rel = Vec::new();
    let configs = listing.as_object().ok_or_else(|| DatasetError::Fetch {
        url: list_url.clone(),
        message: "expected an object of configs".into(),
    })?;
    for (config, splits) in configs {
        for (split, urls) in splits.as_object().into_iter().flatten() {
            for (n, url) in urls.as_array().into_iter().flatten().enumerate() {
                let Some(url) = url.as_str() else { continue };
                let r = format!("{config}/{split}/{n}.parquet");
                let dest = dir.join(&r);
                let bytes = get(url)?;
                let parent = dest.parent().unwrap_or(&dir);
                std::fs::create_dir_all(parent).map_err(|source| DatasetError::Io {
                    path: parent.to_path_buf(),
                    source,
                })?;
                // Write then rename, so an interrupted download is never taken for a file.
                let tmp = dest.with_extension("parquet.part");
                std::fs::write(&tmp, &bytes)
                    .and_then(|_| std::fs::rename(&tmp, &dest))
                    .map_err(|source| DatasetError::Io {
                        path: dest.clone(),
                        source,
                    })?;
                rel.push(r);
            }
        }
    }
    if rel.is_empty() {
        return Err(DatasetError::Fetch {
            url: list_url,
            message: "the dataset lists no parquet files".into(),
        });
    }
    std::fs::write(&manifest, serde_json::to_string(&rel).unwrap_or_default()).map_err(
        |source| DatasetError::Io {
            path: manifest.clone(),
            source,
        },
    )?;
    Ok(rel.iter().map(|r| dir.join(r)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parsing() {
        assert_eq!(
            DatasetSpec::parse("hf:ScalingIntelligence/KernelBench").unwrap(),
            DatasetSpec::HuggingFace("ScalingIntelligence/KernelBench".into())
        );
        assert!(DatasetSpec::parse("hf:nope").is_err());
        assert!(DatasetSpec::parse("hf:a/b/c").is_err());
        assert_eq!(
            DatasetSpec::parse("x/kb.parquet").unwrap(),
            DatasetSpec::Parquet("x/kb.parquet".into())
        );
        assert_eq!(
            DatasetSpec::parse("kb.jsonl").unwrap(),
            DatasetSpec::Jsonl("kb.jsonl".into())
        );
        assert_eq!(
            DatasetSpec::parse("KernelBench").unwrap(),
            DatasetSpec::Dir("KernelBench".into())
        );
    }

    #[test]
    fn jsonl_rows_become_problems_with_file_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("kb.jsonl");
        let code = "import torch\n# c\nx = 1\n";
        let rows = [
            serde_json::json!({"code": code, "level": 1, "name": "19_ReLU.py", "problem_id": 19}),
            serde_json::json!({"code": "y = 2", "level": 2, "name": "1_Fuse.py", "problem_id": 1, "extra": true}),
        ];
        let text: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
        std::fs::write(&p, text.join("\n") + "\n\n").unwrap();
        let set = DatasetSpec::Jsonl(p.clone()).load().unwrap();
        assert_eq!(set.len(), 2);
        let relu = set.get("level1/19_ReLU").unwrap();
        assert_eq!(relu.sha256, crate::hash::hashes(code).0);
        assert_eq!(relu.source, code);
        assert_eq!(relu.path, PathBuf::from("level1/19_ReLU.py"));

        std::fs::write(&p, "{\"code\": 1}\n").unwrap();
        let e = DatasetSpec::Jsonl(p).load().unwrap_err();
        assert!(matches!(e, DatasetError::Row { line: 1, .. }), "{e}");
    }

    /// Writes rows the way the hub's parquet export lays them out.
    fn write_parquet(
        path: &Path,
        rows: &[(&str, i64, &str, i64)],
        compression: parquet::basic::Compression,
    ) {
        use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;
        use std::sync::Arc;
        let schema = Arc::new(
            parquet::schema::parser::parse_message_type(
                "message schema { REQUIRED BYTE_ARRAY code (UTF8); REQUIRED INT64 level; \
                 REQUIRED BYTE_ARRAY name (UTF8); REQUIRED INT64 problem_id; }",
            )
            .unwrap(),
        );
        let props = Arc::new(
            WriterProperties::builder()
                .set_compression(compression)
                .build(),
        );
        let mut w =
            SerializedFileWriter::new(std::fs::File::create(path).unwrap(), schema, props).unwrap();
        let mut rg = w.next_row_group().unwrap();
        let codes: Vec<ByteArray> = rows.iter().map(|r| ByteArray::from(r.0)).collect();
        let levels: Vec<i64> = rows.iter().map(|r| r.1).collect();
        let names: Vec<ByteArray> = rows.iter().map(|r| ByteArray::from(r.2)).collect();
        let ids: Vec<i64> = rows.iter().map(|r| r.3).collect();
        for (strings, ints) in [
            (Some(&codes), None),
            (None, Some(&levels)),
            (Some(&names), None),
            (None, Some(&ids)),
        ] {
            let mut col = rg.next_column().unwrap().unwrap();
            match (strings, ints) {
                (Some(v), _) => col
                    .typed::<ByteArrayType>()
                    .write_batch(v, None, None)
                    .unwrap(),
                (_, Some(v)) => col.typed::<Int64Type>().write_batch(v, None, None).unwrap(),
                _ => unreachable!(),
            };
            col.close().unwrap();
        }
        rg.close().unwrap();
        w.close().unwrap();
    }

    #[test]
    fn parquet_rows_become_the_same_problems_as_files() {
        use parquet::basic::{Compression, ZstdLevel};
        let dir = tempfile::tempdir().unwrap();
        let relu = "import torch\n\nclass Model:\n    \"\"\"doc\"\"\"\n    pass  # c\n";
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("level1")).unwrap();
        std::fs::create_dir_all(tree.join("level2")).unwrap();
        std::fs::write(tree.join("level1/19_ReLU.py"), relu).unwrap();
        std::fs::write(tree.join("level2/1_Fuse.py"), "y = 2\n").unwrap();
        let from_files = DatasetSpec::Dir(tree).load().unwrap();
        for (i, c) in [Compression::SNAPPY, Compression::ZSTD(ZstdLevel::default())]
            .into_iter()
            .enumerate()
        {
            let p = dir.path().join(format!("kb{i}.parquet"));
            write_parquet(
                &p,
                &[(relu, 1, "19_ReLU.py", 19), ("y = 2\n", 2, "1_Fuse.py", 1)],
                c,
            );
            let set = DatasetSpec::parse(p.to_str().unwrap())
                .unwrap()
                .load()
                .unwrap();
            assert_eq!(set.len(), 2);
            for (a, b) in set.iter().zip(from_files.iter()) {
                assert_eq!(
                    (&a.key, &a.sha256, &a.md5, &a.source),
                    (&b.key, &b.sha256, &b.md5, &b.source)
                );
            }
        }
        std::fs::write(dir.path().join("bad.parquet"), b"not parquet").unwrap();
        let e = DatasetSpec::Parquet(dir.path().join("bad.parquet"))
            .load()
            .unwrap_err();
        assert!(matches!(e, DatasetError::Parquet { .. }), "{e}");
    }

    /// Serves `routes` (path → body) over HTTP on loopback for `requests` requests.
    fn serve(
        listener: std::net::TcpListener,
        routes: Vec<(String, Vec<u8>)>,
        requests: usize,
    ) -> std::thread::JoinHandle<Vec<String>> {
        use std::io::Write;
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            for stream in listener.incoming().take(requests) {
                let mut stream = stream.unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = stream.read(&mut buf).unwrap();
                    if n == 0 {
                        break;
                    }
                    req.extend_from_slice(&buf[..n]);
                }
                let line = String::from_utf8_lossy(&req)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let path = line.split(' ').nth(1).unwrap_or("").to_string();
                let body = routes
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, b)| b.clone());
                let (status, body) = match body {
                    Some(b) => ("200 OK", b),
                    None => ("404 Not Found", b"{}".to_vec()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                stream.write_all(head.as_bytes()).unwrap();
                stream.write_all(&body).unwrap();
                seen.push(path);
            }
            seen
        })
    }

    fn listen() -> (std::net::TcpListener, String) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        (listener, base)
    }

    #[test]
    fn hf_fetch_downloads_listed_parquet_files_then_reads_them_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let pq = dir.path().join("src.parquet");
        write_parquet(
            &pq,
            &[("x = 1\n", 1, "3_ReLU.py", 3)],
            parquet::basic::Compression::SNAPPY,
        );
        let bytes = std::fs::read(&pq).unwrap();
        // The listing names absolute URLs, so bind first and fill the address in.
        let (listener, base) = listen();
        let routes = vec![
            (
                "/api/datasets/o/n/parquet".to_string(),
                format!("{{\"default\": {{\"level_1\": [\"{base}/files/level_1/0.parquet\"]}}}}")
                    .into_bytes(),
            ),
            ("/files/level_1/0.parquet".to_string(), bytes.clone()),
        ];
        let handle = serve(listener, routes, 2);
        let cache = dir.path().join("cache");
        let files = fetch_hf_from(&base, "o/n", &cache, false).unwrap();
        assert_eq!(
            handle.join().unwrap(),
            ["/api/datasets/o/n/parquet", "/files/level_1/0.parquet"]
        );
        assert_eq!(files, vec![cache.join("hf/o__n/default/level_1/0.parquet")]);
        assert_eq!(std::fs::read(&files[0]).unwrap(), bytes);
        // Second time: no server is running, the cache answers.
        let again = fetch_hf_from(&base, "o/n", &cache, false).unwrap();
        assert_eq!(again, files);
        let rows = read_parquet(&again[0]).unwrap();
        assert_eq!(rows[0].1.name, "3_ReLU.py");
        // A refresh with the hub unreachable is a fetch error naming the URL.
        let e = fetch_hf_from(&base, "o/n", &cache, true).unwrap_err();
        assert!(matches!(e, DatasetError::Fetch { .. }), "{e}");
        assert!(e.to_string().contains("/api/datasets/o/n/parquet"), "{e}");
    }

    #[test]
    fn hf_fetch_reports_http_errors() {
        let (listener, base) = listen();
        let handle = serve(listener, vec![], 1);
        let cache = tempfile::tempdir().unwrap();
        let e = fetch_hf_from(&base, "o/missing", cache.path(), false).unwrap_err();
        handle.join().unwrap();
        assert!(e.to_string().contains("404"), "{e}");
    }

    #[test]
    fn hf_fetch_reuses_a_complete_cache_without_network() {
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path().join("hf/o__n/default/level_1");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0.parquet"), b"x").unwrap();
        std::fs::write(
            cache.path().join("hf/o__n/manifest.json"),
            "[\"default/level_1/0.parquet\"]",
        )
        .unwrap();
        let files = fetch_hf("o/n", cache.path(), false).unwrap();
        assert_eq!(files, vec![dir.join("0.parquet")]);
    }
}
