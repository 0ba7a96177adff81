//! Matrix Market files: coordinate (real, integer, pattern; general,
//! symmetric, skew-symmetric) for matrices, array (real) for vectors.

use crate::error::{host_copy, host_vec, host_with_capacity, Error, Result};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

/// A matrix as triplets (0-based), in file order with symmetric mirrors expanded.
pub struct Triplets {
    pub nrows: usize,
    pub ncols: usize,
    pub rows: Vec<i64>,
    pub cols: Vec<i64>,
    pub vals: Vec<f64>,
}

impl Triplets {
    /// CSR arrays (0-based, rows in order, file order within a row).
    pub fn to_csr(&self) -> Result<(Vec<i64>, Vec<i64>, Vec<f64>)> {
        let mut rp = host_vec(self.nrows + 1, 0i64, "row_ptr")?;
        for &r in &self.rows {
            rp[r as usize + 1] += 1;
        }
        for i in 0..self.nrows {
            rp[i + 1] += rp[i];
        }
        let mut fill = host_copy(&rp, "row_ptr")?;
        let (mut ci, mut v) = (host_vec(self.vals.len(), 0i64, "col_ind")?, host_vec(self.vals.len(), 0.0, "values")?);
        for k in 0..self.vals.len() {
            let r = self.rows[k] as usize;
            let at = fill[r] as usize;
            ci[at] = self.cols[k];
            v[at] = self.vals[k];
            fill[r] += 1;
        }
        Ok((rp, ci, v))
    }
}

fn bad(path: &Path, line: usize, what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("{}:{line}: {what}", path.display()))
}

struct Lines<R: BufRead> {
    inner: std::io::Lines<R>,
    number: usize,
}

impl<R: BufRead> Lines<R> {
    /// The next line that is not a comment or blank.
    fn next_data(&mut self, path: &Path) -> Result<Option<String>> {
        for l in self.inner.by_ref() {
            self.number += 1;
            let l = l.map_err(|e| bad(path, self.number, format!("not a text line ({e})")))?;
            let t = l.trim();
            if !t.is_empty() && !t.starts_with('%') {
                return Ok(Some(t.to_string()));
            }
        }
        Ok(None)
    }
}

/// An open Matrix Market file: its header words, its lines after the
/// header and its length in bytes (which bounds every size it declares).
struct File {
    header: Vec<String>,
    lines: Lines<BufReader<std::fs::File>>,
    bytes: u64,
}

/// An error about the file at `path`, named in quotes (so an empty path shows).
fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::invalid(format!("path {:?}: {e}", path.display().to_string()))
}

fn open(path: &Path) -> Result<File> {
    let f = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let meta = f.metadata().map_err(|e| io_error(path, e))?;
    if meta.is_dir() {
        return Err(Error::invalid(format!("{}: is a directory, not a Matrix Market file", path.display())));
    }
    if meta.len() == 0 {
        return Err(bad(path, 1, "empty file"));
    }
    let mut lines = Lines { inner: BufReader::new(f).lines(), number: 1 };
    let header = match lines.inner.next() {
        Some(Ok(h)) => h,
        Some(Err(_)) => return Err(bad(path, 1, "not a text file (a Matrix Market file starts with %%MatrixMarket)")),
        None => return Err(bad(path, 1, "empty file")),
    };
    let words: Vec<String> = header.split_whitespace().map(|w| w.to_ascii_lowercase()).collect();
    if words.len() != 5 || words[0] != "%%matrixmarket" || words[1] != "matrix" {
        let shown: String = header.chars().take(80).collect();
        return Err(bad(path, 1, format!("not a Matrix Market header: {shown:?}")));
    }
    Ok(File { header: words, lines, bytes: meta.len() })
}

/// Checks that `count` items of at least `min_bytes` each fit in the file,
/// before anything is allocated for them.
fn fits(path: &Path, line: usize, count: u64, min_bytes: u64, bytes: u64, what: &str) -> Result<()> {
    if count.checked_mul(min_bytes).is_none_or(|b| b > bytes) {
        return Err(bad(
            path,
            line,
            format!("declares {count} {what}, but the file's {bytes} bytes hold at most {}", bytes / min_bytes),
        ));
    }
    Ok(())
}

/// fegpu stores int32 indices: a declared dimension must be 1 .. 2^31 - 2.
fn dimension(path: &Path, line: usize, name: &str, v: u64) -> Result<usize> {
    if v == 0 {
        return Err(bad(path, line, format!("{name} = 0: a matrix needs at least one row and one column")));
    }
    if v >= i32::MAX as u64 {
        return Err(Error::unsupported(format!(
            "{}:{line}: {name} = {v}: fegpu stores int32 indices (fewer than 2^31 - 1 rows and columns)",
            path.display()
        )));
    }
    Ok(v as usize)
}

fn value(path: &Path, line: usize, w: &str) -> Result<f64> {
    match w.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(bad(path, line, format!("value {w:?} is not a finite double"))),
        Err(_) => Err(bad(path, line, format!("cannot read {w:?} as a number"))),
    }
}

fn numbers<T: std::str::FromStr>(path: &Path, line: usize, text: &str, want: usize) -> Result<Vec<T>> {
    let v: Vec<T> = text
        .split_whitespace()
        .map(|w| {
            w.parse::<T>().map_err(|_| match w.starts_with('-') {
                true => bad(path, line, format!("{w}: a size or count cannot be negative")),
                false => bad(path, line, format!("cannot read {w:?} as a whole number")),
            })
        })
        .collect::<Result<_>>()?;
    if v.len() != want {
        return Err(bad(path, line, format!("expected {want} numbers, found {}", v.len())));
    }
    Ok(v)
}

pub fn read_matrix(path: &Path) -> Result<Triplets> {
    let File { header: h, mut lines, bytes } = open(path)?;
    if h[2] != "coordinate" {
        return Err(bad(path, 1, format!("format {:?}: matrices are read in coordinate format", h[2])));
    }
    let field = h[3].as_str();
    if !matches!(field, "real" | "integer" | "pattern" | "double") {
        return Err(bad(path, 1, format!("field {field:?} unsupported (real, integer, pattern)")));
    }
    let sym = h[4].as_str();
    if !matches!(sym, "general" | "symmetric" | "skew-symmetric") {
        return Err(bad(path, 1, format!("symmetry {sym:?} unsupported (general, symmetric, skew-symmetric)")));
    }
    let size = lines.next_data(path)?.ok_or_else(|| bad(path, lines.number, "missing size line"))?;
    let at = lines.number;
    let s: Vec<u64> = numbers(path, at, &size, 3)?;
    let (nrows, ncols) = (dimension(path, at, "rows", s[0])?, dimension(path, at, "columns", s[1])?);
    if sym != "general" && nrows != ncols {
        return Err(bad(path, at, format!("a {sym} matrix must be square, not {nrows} x {ncols}")));
    }
    // a symmetric file lists one triangle (the lower, by the format's rule):
    // entries on both sides of the diagonal would each count twice
    // (line, row, column) of the first entry below and above it
    let (mut below, mut above) = (None::<(usize, i64, i64)>, None::<(usize, i64, i64)>);
    // An entry line is at least "i j\n" (pattern) or "i j v\n".
    let want = if field == "pattern" { 2 } else { 3 };
    fits(path, at, s[2], 2 * want as u64, bytes, "entries")?;
    let nnz = s[2] as usize;
    let stored = if sym == "general" { nnz } else { 2 * nnz };
    let mut t = Triplets {
        nrows,
        ncols,
        rows: host_with_capacity(stored, "entries")?,
        cols: host_with_capacity(stored, "entries")?,
        vals: host_with_capacity(stored, "entries")?,
    };
    for _ in 0..nnz {
        let l = lines.next_data(path)?.ok_or_else(|| bad(path, lines.number, format!("file ends before its {nnz} entries")))?;
        let w: Vec<&str> = l.split_whitespace().collect();
        // more would be data the header does not declare (complex values under "real")
        if w.len() != want {
            return Err(bad(path, lines.number, format!("expected {want} fields ({field}), found {}", w.len())));
        }
        let idx = |s: &str| s.parse::<i64>().map_err(|_| bad(path, lines.number, format!("bad index {s:?}")));
        let (r, c) = (idx(w[0])? - 1, idx(w[1])? - 1);
        if r < 0 || c < 0 || r >= nrows as i64 || c >= ncols as i64 {
            return Err(bad(path, lines.number, format!("entry ({}, {}) outside {nrows} x {ncols}", r + 1, c + 1)));
        }
        let v = if field == "pattern" { 1.0 } else { value(path, lines.number, w[2])? };
        if sym == "skew-symmetric" && r == c && v != 0.0 {
            return Err(bad(
                path,
                lines.number,
                format!("entry ({}, {}) = {v}: a skew-symmetric matrix has a zero diagonal", r + 1, c + 1),
            ));
        }
        if sym != "general" && r != c {
            let side = if r > c { &mut below } else { &mut above };
            side.get_or_insert((lines.number, r + 1, c + 1));
            if let (Some(b), Some(a)) = (below, above) {
                return Err(bad(
                    path,
                    lines.number,
                    format!(
                        "entries on both sides of the diagonal ({}, {}) at line {} and ({}, {}) at line {}): a {sym} file lists one triangle, \
                         the other is implied; write both as general",
                        b.1, b.2, b.0, a.1, a.2, a.0
                    ),
                ));
            }
        }
        t.rows.push(r);
        t.cols.push(c);
        t.vals.push(v);
        if sym != "general" && r != c {
            t.rows.push(c);
            t.cols.push(r);
            t.vals.push(if sym == "skew-symmetric" { -v } else { v });
        }
    }
    no_more_data(path, &mut lines, &format!("its {nnz} declared entries"))?;
    Ok(t)
}

/// The file ends where its size line said (no entry past the declared count).
fn no_more_data<R: BufRead>(path: &Path, lines: &mut Lines<R>, what: &str) -> Result<()> {
    match lines.next_data(path)? {
        Some(_) => Err(bad(path, lines.number, format!("data after {what}"))),
        None => Ok(()),
    }
}

/// A dense vector: array format (one column), or coordinate format with one column.
pub fn read_vector(path: &Path) -> Result<Vec<f64>> {
    let File { header: h, mut lines, bytes } = open(path)?;
    if h[2] == "coordinate" {
        let t = read_matrix(path)?;
        if t.ncols != 1 {
            return Err(bad(path, 1, format!("a vector needs one column, this has {}", t.ncols)));
        }
        let mut v = host_vec(t.nrows, 0.0, "vector")?;
        for k in 0..t.vals.len() {
            v[t.rows[k] as usize] += t.vals[k];
        }
        return Ok(v);
    }
    if !matches!(h[3].as_str(), "real" | "integer" | "double") || h[4] != "general" {
        return Err(bad(path, 1, format!("{} {}: a vector is read as array real general", h[3], h[4])));
    }
    let size = lines.next_data(path)?.ok_or_else(|| bad(path, lines.number, "missing size line"))?;
    let at = lines.number;
    let s: Vec<u64> = numbers(path, at, &size, 2)?;
    if s[1] != 1 {
        return Err(bad(path, at, format!("a vector needs one column, this has {}", s[1])));
    }
    let n = dimension(path, at, "rows", s[0])?;
    fits(path, at, s[0], 2, bytes, "values")?; // "v\n"
    let mut v = host_vec(n, 0.0, "vector")?;
    for x in v.iter_mut() {
        let l = lines.next_data(path)?.ok_or_else(|| bad(path, lines.number, format!("file ends before its {n} values")))?;
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() != 1 {
            return Err(bad(path, lines.number, format!("expected one value, found {}", w.len())));
        }
        *x = value(path, lines.number, w[0])?;
    }
    no_more_data(path, &mut lines, &format!("its {n} declared values"))?;
    Ok(v)
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::File::create(path).and_then(|mut f| f.write_all(text.as_bytes())).map_err(|e| io_error(path, e))
}

/// Writes CSR (0-based) as coordinate real general.
pub fn write_matrix(path: &Path, nrows: usize, ncols: usize, row_ptr: &[i32], col: &[i32], vals: &[f64]) -> Result<()> {
    let mut s = format!("%%MatrixMarket matrix coordinate real general\n% written by fegpu\n{nrows} {ncols} {}\n", vals.len());
    for r in 0..nrows {
        for k in row_ptr[r] as usize..row_ptr[r + 1] as usize {
            let _ = writeln!(s, "{} {} {:.17e}", r + 1, col[k] + 1, vals[k]);
        }
    }
    write_file(path, &s)
}

/// Writes a vector in array format.
pub fn write_vector(path: &Path, v: &[f64]) -> Result<()> {
    let mut s = format!("%%MatrixMarket matrix array real general\n% written by fegpu\n{} 1\n", v.len());
    for x in v {
        let _ = writeln!(s, "{x:.17e}");
    }
    write_file(path, &s)
}
