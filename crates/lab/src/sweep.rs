//! The sweep form of a scenario: a `[sweep]` table maps dotted field paths (array elements by
//! index, e.g. "aggregates.0.flows.1.rtt") to lists of values. Points are the cartesian
//! product of the lists, or with `mode = "zip"` the i-th values of equally long lists together.

use serde::Serialize;
use toml::Value;

#[derive(Debug, Clone)]
pub struct Point {
    pub value: Value,
    pub assignments: Vec<Assignment>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Assignment {
    pub field: String,
    pub value: Value,
}

/// The points of the scenario's sweep (empty without a `[sweep]` table).
pub fn expand(doc: &Value) -> Result<Vec<Point>, String> {
    let Some(sweep) = doc.get("sweep") else { return Ok(Vec::new()) };
    let table = sweep.as_table().ok_or("must be a table of field = [values]")?;
    let zip = match table.get("mode").map(|m| m.as_str()) {
        None => false,
        Some(Some("product")) => false,
        Some(Some("zip")) => true,
        Some(_) => return Err("mode: must be \"product\" or \"zip\"".into()),
    };
    let mut axes: Vec<(String, Vec<Value>)> = Vec::new();
    for (field, values) in table.iter().filter(|(k, _)| *k != "mode") {
        let list = values.as_array().ok_or_else(|| format!("{field}: must be a list of values"))?;
        if list.is_empty() {
            return Err(format!("{field}: empty list"));
        }
        let mut probe = doc.clone();
        set(&mut probe, field, list[0].clone()).map_err(|e| format!("{field}: {e}"))?;
        axes.push((field.clone(), list.clone()));
    }
    if axes.is_empty() {
        return Err("no fields to sweep".into());
    }
    let combos: Vec<Vec<usize>> = if zip {
        let n = axes[0].1.len();
        if let Some((f, _)) = axes.iter().find(|(_, v)| v.len() != n) {
            return Err(format!("{f}: zip mode needs lists of equal length ({n})"));
        }
        (0..n).map(|i| vec![i; axes.len()]).collect()
    } else {
        let mut combos = vec![Vec::new()];
        for (_, values) in &axes {
            combos = combos
                .into_iter()
                .flat_map(|c| (0..values.len()).map(move |i| [c.clone(), vec![i]].concat()))
                .collect();
        }
        combos
    };
    let mut base = doc.clone();
    base.as_table_mut().expect("a TOML document is a table").remove("sweep");
    combos
        .into_iter()
        .map(|idx| {
            let mut value = base.clone();
            let mut assignments = Vec::new();
            for ((field, values), i) in axes.iter().zip(idx) {
                set(&mut value, field, values[i].clone())?;
                assignments.push(Assignment { field: field.clone(), value: values[i].clone() });
            }
            Ok(Point { value, assignments })
        })
        .collect()
}

/// Sets the field at a dotted path; the parent must exist (a typo is an error, not a new key).
fn set(doc: &mut Value, path: &str, v: Value) -> Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut cur = doc;
    for (n, part) in parts.iter().enumerate() {
        let last = n + 1 == parts.len();
        cur = match cur {
            Value::Table(t) => {
                if last {
                    t.insert(part.to_string(), v);
                    return Ok(());
                }
                t.get_mut(*part).ok_or_else(|| format!("no field '{part}' in the scenario"))?
            }
            Value::Array(a) => {
                let i: usize = part.parse().map_err(|_| format!("'{part}' must be an index into a list"))?;
                let len = a.len();
                let slot = a.get_mut(i).ok_or_else(|| format!("index {i} is out of range ({len} elements)"))?;
                if last {
                    *slot = v;
                    return Ok(());
                }
                slot
            }
            _ => return Err(format!("'{part}' is not inside a table or list")),
        };
    }
    Err("empty field path".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_zip_and_typos() {
        let doc: Value = toml::from_str(
            "duration = \"1s\"\n[enforcer]\nrate = \"1mbit\"\n[[aggregates]]\nflows = [{ rtt = \"10ms\" }]\n[sweep]\n\"enforcer.rate\" = [\"1mbit\", \"2mbit\"]\n\"aggregates.0.flows.0.rtt\" = [\"5ms\", \"20ms\", \"50ms\"]\n",
        )
        .unwrap();
        let pts = expand(&doc).unwrap();
        assert_eq!(pts.len(), 6);
        assert_eq!(pts[5].value["aggregates"][0]["flows"][0]["rtt"].as_str(), Some("50ms"));
        assert!(pts[0].value.get("sweep").is_none());
        let mut z = doc.clone();
        z["sweep"].as_table_mut().unwrap().insert("mode".into(), Value::String("zip".into()));
        assert!(expand(&z).unwrap_err().contains("equal length"));
        let mut t = doc.clone();
        t["sweep"].as_table_mut().unwrap().insert("enforcr.rate".into(), Value::Array(vec![Value::Integer(1)]));
        assert!(expand(&t).unwrap_err().contains("enforcr"));
    }
}
