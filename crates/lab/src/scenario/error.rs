//! Scenario errors name the file and the field: serde's TOML errors carry a byte span, turned
//! here into the dotted key path a user can find in the file.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct ScenarioError {
    pub file: String,
    pub field: String,
    pub message: String,
}

pub(super) fn toml_error(text: &str, file: &str, e: toml::de::Error) -> ScenarioError {
    let message = e.message().trim().to_string();
    let field = match e.span() {
        Some(s) => {
            let mut field = key_path_at(text, s.start);
            // A whole table is blamed when serde buffered it (tagged enums such as the enforcer):
            // name the key that the message is about, if one can be found.
            let body = &text[s.start.min(text.len())..s.end.min(text.len())];
            if body.contains('\n') {
                if let Some(k) = key_named_in(body, &message) {
                    field = format!("{field}.{k}");
                }
            }
            field
        }
        None => "(scenario)".into(),
    };
    ScenarioError { file: file.into(), field, message }
}

/// The key of a `key = value` line in `body` whose name (in backticks) or value the message
/// quotes.
fn key_named_in(body: &str, message: &str) -> Option<String> {
    body.lines().filter_map(|l| l.split_once('=')).find_map(|(k, v)| {
        let k = k.trim();
        let v = v.trim().trim_matches('"');
        let quoted = message.contains(&format!("`{k}`")) || (!v.is_empty() && message.contains(&format!("'{v}'")));
        quoted.then(|| k.to_string())
    })
}

/// The dotted key path of the TOML key at or before `offset` (table header, the line's key,
/// and the innermost `key =` of an inline table before the offset), best effort.
fn key_path_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i);
    let line = &text[line_start..line_end];
    let mut parts: Vec<String> = Vec::new();
    if let Some(h) = text[..line_start].lines().rev().find(|l| l.trim_start().starts_with('[')) {
        parts.push(h.trim().trim_matches(['[', ']']).trim().to_string());
    }
    if line.trim_start().starts_with('[') {
        parts = vec![line.trim().trim_matches(['[', ']']).trim().to_string()];
    } else if let Some((first, _)) = line.split_once('=') {
        parts.push(first.trim().trim_matches('"').to_string());
        // The innermost key of an inline table that precedes the offending value.
        let upto = &text[line_start..offset.max(line_start)];
        if let Some(eq) = upto.rfind('=') {
            let inner = upto[..eq].trim_end();
            let key: String = inner
                .chars()
                .rev()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if !key.is_empty() && parts.last() != Some(&key) {
                parts.push(key);
            }
        }
    }
    parts.retain(|p| !p.is_empty());
    if parts.is_empty() {
        "(scenario)".into()
    } else {
        parts.join(".")
    }
}
