//! [`ModelSource`]: a model as the user names it — one GGUF or safetensors file, a Hugging
//! Face model directory, or a sharded checkpoint's `model.safetensors.index.json` — mapped
//! and read as one [`ModelFile`].
//!
//! A directory is read through its `model.safetensors.index.json` when it has one, else as
//! its `*.safetensors` files (name order), else as its single `*.gguf`. An index must list
//! shards that exist next to it, and every tensor it names must be in the shard it names;
//! a tensor stored in two shards is an error. `config.json` beside the weights is read (as
//! JSON) when present.

use crate::error::{IoError, Result};
use crate::mmap::MappedFile;
use crate::model::{Container, ModelFile};
use crate::st::SafetensorsFile;
use std::path::{Path, PathBuf};

/// The index file name Hugging Face uses for sharded safetensors checkpoints.
pub const SAFETENSORS_INDEX: &str = "model.safetensors.index.json";

/// The files of one model, mapped.
pub struct ModelSource {
    /// The model files, in the order their tensors are read.
    pub files: Vec<PathBuf>,
    /// The container: from the first file's extension, else its magic bytes; a source of
    /// several files (shards) is always safetensors.
    pub container: Container,
    /// `config.json` of a Hugging Face directory (or beside the index), if there is one.
    pub config: Option<serde_json::Value>,
    maps: Vec<MappedFile>,
    /// For an index: (tensor, shard file) pairs it promises.
    index: Vec<(String, PathBuf)>,
}

fn bad(path: &Path, reason: impl Into<String>) -> IoError {
    IoError::Checkpoint { path: path.to_path_buf(), reason: reason.into() }
}

fn container_of(path: &Path, map: &MappedFile) -> Container {
    Container::from_path(path).unwrap_or(if map.bytes().starts_with(b"GGUF") {
        Container::Gguf
    } else {
        Container::Safetensors
    })
}

/// `(tensor, shard)` pairs of an index file, shards resolved beside it.
fn read_index(path: &Path) -> Result<Vec<(String, PathBuf)>> {
    let text = std::fs::read_to_string(path).map_err(|e| IoError::io("read", path, e))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(path, format!("not JSON: {e}")))?;
    let map = json
        .get("weight_map")
        .and_then(serde_json::Value::as_object)
        .ok_or_else(|| bad(path, "no \"weight_map\" object"))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::with_capacity(map.len());
    for (tensor, shard) in map {
        let shard = shard.as_str().ok_or_else(|| bad(path, format!("weight_map[{tensor:?}] is not a file name")))?;
        let rel = Path::new(shard);
        if rel.is_absolute() || rel.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
            return Err(bad(path, format!("shard {shard:?} is not a file beside the index")));
        }
        out.push((tensor.clone(), dir.join(rel)));
    }
    if out.is_empty() {
        return Err(bad(path, "the weight_map is empty"));
    }
    Ok(out)
}

fn read_config(dir: &Path) -> Result<Option<serde_json::Value>> {
    let p = dir.join("config.json");
    if !p.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&p).map_err(|e| IoError::io("read", &p, e))?;
    serde_json::from_str(&text).map(Some).map_err(|e| bad(&p, format!("not JSON: {e}")))
}

fn with_extension_in(dir: &Path, ext: &str) -> Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|e| IoError::io("read", dir, e))?;
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x.eq_ignore_ascii_case(ext)))
        .collect();
    v.sort();
    Ok(v)
}

impl ModelSource {
    /// Releases the resident pages of a tensor read from this source once it has been
    /// converted ([`MappedFile::release`]).
    pub fn release(&self, t: &crate::TensorView<'_>) {
        let part = match &t.data {
            crate::TensorData::Borrowed(b) => *b,
            crate::TensorData::Grid { values, .. } => *values,
        };
        for m in &self.maps {
            m.release(part);
        }
    }

    /// Opens a model file, a Hugging Face directory or an index file (see the module docs).
    ///
    /// # Errors
    ///
    /// [`IoError::Io`] when a file cannot be opened or mapped; [`IoError::Checkpoint`] for a
    /// bad index or `config.json`, a directory with no model file (or several `.gguf` and no
    /// index), or several files that are not safetensors.
    pub fn open(path: &Path) -> Result<ModelSource> {
        let (files, index, config) = if path.is_dir() {
            let idx = path.join(SAFETENSORS_INDEX);
            if idx.is_file() {
                let index = read_index(&idx)?;
                (shards(&index), index, read_config(path)?)
            } else {
                let st = with_extension_in(path, "safetensors")?;
                let gguf = with_extension_in(path, "gguf")?;
                match (st.is_empty(), gguf.len()) {
                    (false, _) => (st, Vec::new(), read_config(path)?),
                    (true, 1) => (gguf, Vec::new(), None),
                    (true, 0) => return Err(bad(path, "no .safetensors or .gguf files in this directory")),
                    (true, n) => {
                        return Err(bad(path, format!("{n} .gguf files and no safetensors index: name one of them")));
                    }
                }
            }
        } else if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".index.json")) {
            let index = read_index(path)?;
            (shards(&index), index, read_config(path.parent().unwrap_or(Path::new(".")))?)
        } else {
            (vec![path.to_path_buf()], Vec::new(), None)
        };
        let maps = files.iter().map(|f| MappedFile::open(f)).collect::<Result<Vec<_>>>()?;
        let container = container_of(&files[0], &maps[0]);
        if files.len() > 1 && container != Container::Safetensors {
            return Err(bad(path, "only safetensors checkpoints come in shards"));
        }
        Ok(ModelSource { files, container, config, maps, index })
    }

    /// Bytes of all the model files together.
    pub fn total_bytes(&self) -> u64 {
        self.maps.iter().map(|m| m.bytes().len() as u64).sum()
    }

    /// The model: one file's, or the shards' tensors together, checked against the index.
    ///
    /// # Errors
    ///
    /// [`IoError::InFile`] naming the file around the parser's typed error (see
    /// [`IoError::root`]) when a file does not parse; [`IoError::Checkpoint`] when it lacks a
    /// tensor the index puts in it; the errors of
    /// [`ModelFile::from_safetensors_shards`].
    pub fn model(&self) -> Result<ModelFile<'_>> {
        let at = |i: usize, e: IoError| IoError::InFile { path: self.files[i].clone(), source: Box::new(e) };
        let m = match self.container {
            Container::Gguf => ModelFile::parse(self.maps[0].bytes(), Container::Gguf).map_err(|e| at(0, e))?,
            Container::Safetensors => {
                let shards = self
                    .maps
                    .iter()
                    .enumerate()
                    .map(|(i, m)| SafetensorsFile::parse(m.bytes()).map_err(|e| at(i, e)))
                    .collect::<Result<Vec<_>>>()?;
                for (tensor, shard) in &self.index {
                    let i = self.files.iter().position(|f| f == shard).unwrap_or(0);
                    if shards[i].tensor(tensor).is_none() {
                        return Err(bad(
                            shard,
                            format!("the index puts tensor {tensor:?} here, but the file has no such tensor"),
                        ));
                    }
                }
                ModelFile::from_safetensors_shards(shards)?
            }
        };
        Ok(m)
    }
}

/// The distinct shard files of an index, sorted by name (`model-00001-of-00003…` order).
fn shards(index: &[(String, PathBuf)]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = index.iter().map(|(_, f)| f.clone()).collect();
    v.sort();
    v.dedup();
    v
}
