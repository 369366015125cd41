//! Bridge paths on this side (PROTOCOL.md, Paths; the plugin's `Paths.luau` is the other
//! copy): `game.Workspace.Model.Part`, `Workspace["My.Part"]`, `Workspace.Twin[2]`. The
//! sourcemap is looked up by them, and writes its own nodes' paths the same way.

/// One step of a path: a child's name and, for one of several same-named siblings, its
/// 1-based position among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub name: String,
    pub index: Option<usize>,
}

fn needs_quotes(name: &str) -> bool {
    name.is_empty() || name.contains(['.', '[', ']', '"', '\\'])
}

/// `prefix` with one more segment, written as the plugin writes it.
pub fn join(prefix: &str, name: &str, index: Option<usize>) -> String {
    let mut out = String::with_capacity(prefix.len() + name.len() + 8);
    out.push_str(prefix);
    if needs_quotes(name) {
        out.push_str("[\"");
        for c in name.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push_str("\"]");
    } else {
        if !prefix.is_empty() {
            out.push('.');
        }
        out.push_str(name);
    }
    if let Some(i) = index {
        out.push_str(&format!("[{i}]"));
    }
    out
}

/// Segments as a path with the `game` prefix.
pub fn format_path(segments: &[Segment]) -> String {
    segments
        .iter()
        .fold("game".to_owned(), |out, s| join(&out, &s.name, s.index))
}

/// A path's segments (the `game.` prefix skipped), or what is wrong with it.
pub fn parse_path(path: &str) -> Result<Vec<Segment>, String> {
    let chars: Vec<char> = path.chars().collect();
    let mut segments = Vec::new();
    let mut i = 0;
    let mut first = true;
    while i < chars.len() {
        if !first {
            match chars[i] {
                '.' => {
                    i += 1;
                    if i >= chars.len() {
                        return Err(format!("path ends with '.': {path}"));
                    }
                }
                '[' => {}
                c => return Err(format!("unexpected {c:?} in path {path}")),
            }
        }
        let quoted = chars[i] == '[' && chars.get(i + 1) == Some(&'"');
        let name = if quoted {
            let mut j = i + 2;
            let mut name = String::new();
            loop {
                match chars.get(j) {
                    Some('\\') => match chars.get(j + 1) {
                        Some(c @ ('"' | '\\')) => {
                            name.push(*c);
                            j += 2;
                        }
                        _ => return Err(format!("bad escape in path {path}")),
                    },
                    Some('"') => {
                        if chars.get(j + 1) != Some(&']') {
                            return Err(format!("expected ']' in path {path}"));
                        }
                        j += 2;
                        break;
                    }
                    Some(c) => {
                        name.push(*c);
                        j += 1;
                    }
                    None => return Err(format!("unterminated quoted name in path {path}")),
                }
            }
            i = j;
            name
        } else if chars[i] == '[' {
            return Err(format!("unexpected '[' in path {path}"));
        } else {
            let start = i;
            while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                i += 1;
            }
            if i == start {
                return Err(format!("empty name in path {path}"));
            }
            chars[start..i].iter().collect()
        };
        let mut index = None;
        if chars.get(i) == Some(&'[') && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
            let start = i + 1;
            let mut j = start;
            while chars.get(j).is_some_and(char::is_ascii_digit) {
                j += 1;
            }
            if chars.get(j) != Some(&']') {
                return Err(format!("unterminated sibling index in path {path}"));
            }
            let digits: String = chars[start..j].iter().collect();
            match digits.parse::<usize>() {
                Ok(n) if n >= 1 => index = Some(n),
                _ => return Err(format!("sibling index must be 1 or more in path {path}")),
            }
            i = j + 1;
        }
        let is_game_prefix = first && !quoted && name == "game" && index.is_none();
        if !is_game_prefix {
            segments.push(Segment { name, index });
        }
        first = false;
    }
    Ok(segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(name: &str, index: Option<usize>) -> Segment {
        Segment {
            name: name.to_owned(),
            index,
        }
    }

    #[test]
    fn paths_round_trip_as_the_plugin_writes_them() {
        for path in [
            "game.Workspace.Model.Part",
            r#"game.Workspace["My.Part"]"#,
            "game.Workspace.Twin[2]",
            r#"game.Workspace["a\"b\\c"][3].X"#,
            r#"game.Workspace[""]"#,
        ] {
            let segments = parse_path(path).unwrap();
            assert_eq!(format_path(&segments), path);
        }
        assert_eq!(
            parse_path("Workspace.Twin[2]").unwrap(),
            [seg("Workspace", None), seg("Twin", Some(2))]
        );
        assert_eq!(parse_path("game").unwrap(), []);
        assert!(parse_path("Workspace.").is_err());
        assert!(parse_path("Workspace..A").is_err());
        assert!(parse_path("Workspace.A[0]").is_err());
        assert!(parse_path(r#"Workspace["open"#).is_err());
    }
}
