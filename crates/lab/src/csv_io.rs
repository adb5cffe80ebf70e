//! The arrivals CSV read by `ratekit replay`, and output files that appear whole or not at all.
//!
//! Input: a header row naming at least `time_ns`, `aggregate`, `flow` and `bytes` (any order), and
//! optionally `class`. Other columns are carried through to the output untouched. Rows are read
//! one at a time (the file is streamed, never held in memory).

use anyhow::Context;
use csv::{ByteRecord, StringRecord};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The largest packet accepted: the largest IPv4 / non-jumbo IPv6 packet.
pub const MAX_PACKET_BYTES: u32 = 65_535;

/// Columns appended by replay; an input that already has them is rejected, so the output's
/// columns stay unambiguous.
pub const OUTPUT_COLUMNS: [&str; 2] = ["verdict", "departure_ns"];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InputError {
    #[error("line {line}: {message}")]
    Row { line: u64, message: String },
    #[error("line {line}, field '{field}': {message}")]
    Field { line: u64, field: &'static str, message: String },
    #[error("header: {0}")]
    Header(String),
}

/// One parsed arrival. `aggregate` and `flow` keep their text so the summary can name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub line: u64,
    pub time_ns: u64,
    pub aggregate: String,
    pub flow: String,
    pub bytes: u32,
    pub class: u16,
}

/// Where each known column sits in the header.
#[derive(Debug, Clone, Copy)]
struct Columns {
    time_ns: usize,
    aggregate: usize,
    flow: usize,
    bytes: usize,
    class: Option<usize>,
}

/// Streams rows from an arrivals CSV, checking each field and that time never goes backwards.
pub struct ArrivalReader<R: Read> {
    reader: csv::Reader<R>,
    header: StringRecord,
    cols: Columns,
    record: ByteRecord,
    last_time: Option<(u64, u64)>,
}

impl<R: Read> ArrivalReader<R> {
    pub fn new(input: R) -> Result<Self, InputError> {
        let mut reader = csv::ReaderBuilder::new().has_headers(true).flexible(false).from_reader(input);
        let header = reader.headers().map_err(|e| InputError::Header(e.to_string()))?.clone();
        let find = |name: &str| header.iter().position(|h| h.trim() == name);
        let need = |name: &'static str| {
            find(name).ok_or_else(|| {
                InputError::Header(format!(
                    "missing column '{name}' (the header must name time_ns, aggregate, flow, bytes and optionally class; found: {})",
                    header.iter().collect::<Vec<_>>().join(",")
                ))
            })
        };
        let cols = Columns {
            time_ns: need("time_ns")?,
            aggregate: need("aggregate")?,
            flow: need("flow")?,
            bytes: need("bytes")?,
            class: find("class"),
        };
        for name in OUTPUT_COLUMNS {
            if find(name).is_some() {
                return Err(InputError::Header(format!("column '{name}' is written by replay and cannot be an input column")));
            }
        }
        Ok(ArrivalReader { reader, header, cols, record: ByteRecord::new(), last_time: None })
    }

    pub fn header(&self) -> &StringRecord {
        &self.header
    }

    /// Bytes of input consumed so far (for progress reporting).
    pub fn bytes_read(&self) -> u64 {
        self.reader.position().byte()
    }

    /// The next row, with its raw fields for pass-through, or `None` at the end of the input.
    pub fn next_row(&mut self) -> Option<Result<(Row, StringRecord), InputError>> {
        match self.reader.read_byte_record(&mut self.record) {
            Ok(false) => None,
            Ok(true) => Some(self.parse_current()),
            Err(e) => {
                let line = e.position().map(|p| p.line()).unwrap_or(0);
                let message = match e.kind() {
                    csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
                        format!("has {len} fields, the header has {expected_len}")
                    }
                    _ => e.to_string(),
                };
                Some(Err(InputError::Row { line, message }))
            }
        }
    }

    fn parse_current(&mut self) -> Result<(Row, StringRecord), InputError> {
        let line = self.record.position().map(|p| p.line()).unwrap_or(0);
        let record = StringRecord::from_byte_record(self.record.clone())
            .map_err(|_| InputError::Row { line, message: "is not valid UTF-8".into() })?;
        let field = |i: usize| record.get(i).unwrap_or("").trim();
        let bad = |field: &'static str, message: String| InputError::Field { line, field, message };

        let time_ns: u64 = field(self.cols.time_ns)
            .parse()
            .map_err(|_| bad("time_ns", format!("'{}' is not a non-negative integer", field(self.cols.time_ns))))?;
        let aggregate = field(self.cols.aggregate);
        if aggregate.is_empty() {
            return Err(bad("aggregate", "is empty".into()));
        }
        let flow = field(self.cols.flow);
        if flow.is_empty() {
            return Err(bad("flow", "is empty".into()));
        }
        let bytes_text = field(self.cols.bytes);
        let bytes: u32 = match bytes_text.parse::<u64>() {
            Ok(b) if (1..=MAX_PACKET_BYTES as u64).contains(&b) => b as u32,
            _ => return Err(bad("bytes", format!("'{bytes_text}' is not a packet length in 1..={MAX_PACKET_BYTES}"))),
        };
        let class = match self.cols.class.map(field) {
            None | Some("") => 0,
            Some(text) => text.parse().map_err(|_| bad("class", format!("'{text}' is not a class number in 0..=65535")))?,
        };
        if let Some((prev, prev_line)) = self.last_time {
            if time_ns < prev {
                return Err(bad("time_ns", format!("{time_ns} is earlier than line {prev_line}'s {prev}: rows must be sorted by time")));
            }
        }
        self.last_time = Some((time_ns, line));
        let row = Row { line, time_ns, aggregate: aggregate.to_string(), flow: flow.to_string(), bytes, class };
        Ok((row, record))
    }
}

/// The flow key an enforcer hashes: the number itself when the flow column is an integer (so
/// hand-written traces classify predictably), else a 64-bit FNV-1a hash of the text.
pub fn flow_key(flow: &str) -> u64 {
    flow.parse().unwrap_or_else(|_| {
        flow.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
    })
}

/// A file written to a temporary name in its final directory and renamed into place only by
/// `commit`: a run that fails midway leaves no partial output (the temporary file is removed
/// when this is dropped).
pub struct AtomicFile {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl AtomicFile {
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()))
            .suffix(".tmp")
            .tempfile_in(dir)
            .with_context(|| format!("cannot create a file in {}", dir.display()))?;
        Ok(AtomicFile { tmp, path: path.to_path_buf() })
    }

    pub fn writer(&mut self) -> &mut std::fs::File {
        self.tmp.as_file_mut()
    }

    pub fn commit(mut self) -> anyhow::Result<()> {
        self.tmp.as_file_mut().flush()?;
        self.tmp.persist(&self.path).with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(())
    }
}

/// Writes `bytes` to `path` whole or not at all.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.writer().write_all(bytes)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read_all(text: &[u8]) -> Result<Vec<Row>, InputError> {
        let mut r = ArrivalReader::new(text)?;
        let mut rows = Vec::new();
        while let Some(row) = r.next_row() {
            rows.push(row?.0);
        }
        Ok(rows)
    }

    #[test]
    fn reads_columns_by_name_with_optional_class() {
        let rows = read_all(b"flow,time_ns,bytes,aggregate,note\nf1,10,1500,a,x\nf2,20,40,b,y\n").unwrap();
        assert_eq!(rows[1], Row { line: 3, time_ns: 20, aggregate: "b".into(), flow: "f2".into(), bytes: 40, class: 0 });
        let rows = read_all(b"time_ns,aggregate,flow,bytes,class\n5,a,1,100,3\n5,a,1,100,\n").unwrap();
        assert_eq!((rows[0].class, rows[1].class), (3, 0));
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = read_all(b"time_ns,aggregate,flow,bytes\n10,a,1,100\n5,a,1,100\n").unwrap_err();
        assert!(matches!(e, InputError::Field { line: 3, field: "time_ns", .. }), "{e}");
        let e = read_all(b"time_ns,aggregate,flow,bytes\n10,a,1\n").unwrap_err();
        assert!(matches!(e, InputError::Row { line: 2, .. }), "{e}");
        let e = read_all(b"time_ns,aggregate,flow,bytes\n10,a,1,0\n").unwrap_err();
        assert!(matches!(e, InputError::Field { field: "bytes", .. }), "{e}");
        let e = read_all(b"time_ns,aggregate,flow,bytes\n-1,a,1,10\n").unwrap_err();
        assert!(matches!(e, InputError::Field { field: "time_ns", .. }), "{e}");
        let e = read_all(b"time_ns,aggregate,flow,bytes,class\n1,a,1,10,70000\n").unwrap_err();
        assert!(matches!(e, InputError::Field { field: "class", .. }), "{e}");
        assert!(matches!(read_all(b"time,aggregate,flow,bytes\n"), Err(InputError::Header(_))));
        assert!(matches!(read_all(b"time_ns,aggregate,flow,bytes,verdict\n"), Err(InputError::Header(_))));
    }

    #[test]
    fn numeric_flows_keep_their_value() {
        assert_eq!(flow_key("42"), 42);
        assert_ne!(flow_key("a"), flow_key("b"));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut input = b"time_ns,aggregate,flow,bytes,class\n".to_vec();
            input.extend_from_slice(&data);
            let _ = read_all(&input);
            let _ = read_all(&data);
        }

        #[test]
        fn valid_rows_round_trip(rows in proptest::collection::vec(
            (0u64..1_000_000, "[a-z0-9]{1,6}", "[a-z0-9]{1,6}", 1u32..=MAX_PACKET_BYTES, any::<u16>()), 0..50)) {
            let mut sorted = rows.clone();
            sorted.sort_by_key(|r| r.0);
            let mut text = String::from("time_ns,aggregate,flow,bytes,class\n");
            for (t, a, f, b, c) in &sorted {
                text.push_str(&format!("{t},{a},{f},{b},{c}\n"));
            }
            let got = read_all(text.as_bytes()).unwrap();
            prop_assert_eq!(got.len(), sorted.len());
            for (g, (t, a, f, b, c)) in got.iter().zip(&sorted) {
                prop_assert_eq!((g.time_ns, &g.aggregate, &g.flow, g.bytes, g.class), (*t, a, f, *b, *c));
            }
        }
    }
}
