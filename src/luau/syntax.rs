//! The syntax gate: Luau's own parser, through the compiler the `mlua` crate vendors
//! (Roblox's parser and compiler, unchanged), so what it refuses Studio would refuse too.
//! Compiling never runs anything: no Lua state is created, the bytecode is dropped.
//!
//! Luau's compiler stops at the first error and names its line (never a column), so a
//! refusal carries one error; its message is Luau's own. Past the parser, what the compiler
//! refuses (more than 200 locals in a function, …) is refused too: Studio compiles with the
//! same limits.

use serde::Serialize;

/// One syntax error: the 1-based line Luau names, and its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyntaxError {
    pub line: u32,
    /// Luau's compiler reports no column; kept for a parser that does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    pub message: String,
}

/// Checks `source` with Luau's parser. `Ok` when it compiles; otherwise the errors found
/// (Luau stops at the first), lines counted from 1 in `source`.
pub fn check(source: &str) -> Result<(), Vec<SyntaxError>> {
    // No optimization, debug or type information: only whether it parses and compiles
    // matters, and these levels change nothing of what is accepted.
    let compiler = mlua::chunk::Compiler::new()
        .set_optimization_level(0)
        .set_debug_level(0)
        .set_type_info_level(0);
    match compiler.compile(source) {
        Ok(_) => Ok(()),
        Err(mlua::Error::SyntaxError { message, .. }) => Err(vec![parse_message(&message)]),
        Err(other) => Err(vec![SyntaxError {
            line: 1,
            column: None,
            message: other.to_string(),
        }]),
    }
}

/// `12: Expected 'end' …` (the compiler's `:12: …` without its colon) → line 12 and the
/// message. A message without a line (never seen from Luau) is kept whole, on line 1.
fn parse_message(message: &str) -> SyntaxError {
    let text = message.strip_prefix(':').unwrap_or(message);
    if let Some((line, rest)) = text.split_once(':')
        && let Ok(line) = line.trim().parse::<u32>()
    {
        return SyntaxError {
            line,
            column: None,
            message: rest.trim_start().to_owned(),
        };
    }
    SyntaxError {
        line: 1,
        column: None,
        message: message.trim().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted(source: &str) {
        if let Err(errors) = check(source) {
            panic!("valid Luau refused: {errors:?}\n--- source ---\n{source}");
        }
    }

    fn refused_at(source: &str, line: u32) -> SyntaxError {
        match check(source) {
            Ok(()) => panic!("broken Luau accepted:\n{source}"),
            Err(errors) => {
                assert_eq!(errors.len(), 1, "{errors:?}");
                let error = errors.into_iter().next().expect("one error");
                assert_eq!(error.line, line, "{error:?}\n--- source ---\n{source}");
                assert!(!error.message.is_empty());
                assert!(!error.message.starts_with(':'), "{error:?}");
                error
            }
        }
    }

    /// Every form of the grammar luau.org's syntax reference lists, as the bundled
    /// version knows it.
    const MODERN: &[(&str, &str)] = &[
        ("empty", ""),
        ("plain Lua", "local x = 1\nprint(x)\nreturn x"),
        (
            "type annotations",
            "local x: number = 1\nlocal function f(a: string, b: number?): (string, number)\n\treturn a, b or 0\nend",
        ),
        (
            "type aliases",
            "type Point = { x: number, y: number }\nexport type Pair<T> = { first: T, second: T }\nlocal p: Point = { x = 1, y = 2 }",
        ),
        (
            "function types",
            "type Callback = (number, string) -> boolean\nlocal f: (...number) -> () = function(...) end",
        ),
        (
            "generics",
            "local function id<T>(x: T): T\n\treturn x\nend\nlocal function map<K, V, R>(t: { [K]: V }, f: (V) -> R): { [K]: R }\n\tlocal out = {}\n\tfor k, v in t do\n\t\tout[k] = f(v)\n\tend\n\treturn out\nend",
        ),
        (
            "generic packs",
            "type Fn<T..., U...> = (T...) -> U...\nlocal function pass<T...>(...: T...): T...\n\treturn ...\nend",
        ),
        (
            "unions, intersections, singletons",
            "type A = \"a\" | \"b\" | nil\ntype B = { x: number } & { y: number }\ntype C = typeof(setmetatable({}, {}))",
        ),
        (
            "casts",
            "local n = (\"5\" :: any) :: number\nlocal t = {} :: { string }",
        ),
        (
            "if-expressions",
            "local x = if math.random() > 0.5 then \"a\" elseif true then \"b\" else \"c\"",
        ),
        (
            "string interpolation",
            "local name = \"x\"\nprint(`hello {name}, {1 + 2} and \\{braces\\}`)\nprint(`{`nested {name}`}`)",
        ),
        (
            "continue",
            "for i = 1, 10 do\n\tif i % 2 == 0 then\n\t\tcontinue\n\tend\n\tprint(i)\nend",
        ),
        ("continue as a name", "local continue = 1\nprint(continue)"),
        (
            "compound assignment",
            "local x = 1\nx += 1\nx -= 1\nx *= 2\nx /= 2\nx //= 1\nx %= 3\nx ^= 2\nlocal s = \"a\"\ns ..= \"b\"",
        ),
        ("floor division", "local q = 7 // 2"),
        ("generalized iteration", "for k, v in { 1, 2 } do\n\tprint(k, v)\nend"),
        (
            "attributes",
            "@native\nlocal function hot(x: number): number\n\treturn x * 2\nend\nlocal t = {}\n@native function t.g() end",
        ),
        (
            "integer literals",
            "local a = 0xFF_FF\nlocal b = 0b1010_1010\nlocal c = 1_000_000",
        ),
        (
            "long strings and comments",
            "local s = [==[\nlong ]] string\n]==]\n--[[ block\ncomment ]]\n--[=[ another ]=]\nreturn s",
        ),
        (
            "read and write properties",
            "type T = { read x: number, write y: string }",
        ),
        (
            "typeof and type functions",
            "local v = 1\ntype V = typeof(v)\ntype K = keyof<{ a: number }>",
        ),
        (
            "varargs and methods",
            "local obj = {}\nfunction obj:method(...: any)\n\treturn self, select('#', ...)\nend",
        ),
        ("strict mode comment", "--!strict\n--!native\nlocal x: number = 1"),
        (
            "roblox idioms",
            "local Players = game:GetService(\"Players\")\nlocal part = Instance.new(\"Part\")\npart.Position = Vector3.new(0, 5, 0)\npart.Parent = workspace\nPlayers.PlayerAdded:Connect(function(player: Player)\n\tprint(player.Name)\nend)",
        ),
    ];

    #[test]
    fn every_form_of_modern_luau_is_accepted() {
        for (what, source) in MODERN {
            if let Err(errors) = check(source) {
                panic!("{what}: valid Luau refused: {errors:?}\n{source}");
            }
        }
    }

    #[test]
    fn the_plugins_own_sources_are_accepted() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin/src");
        let mut seen = 0;
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("plugin/src") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "luau") {
                    let source = std::fs::read_to_string(&path).expect("plugin source");
                    if let Err(errors) = check(&source) {
                        panic!("{} refused: {errors:?}", path.display());
                    }
                    seen += 1;
                }
            }
        }
        assert!(seen > 10, "read {seen} plugin files");
    }

    #[test]
    fn broken_luau_is_refused_with_the_line_luau_names() {
        let cases: &[(&str, u32)] = &[
            ("local x = ", 1),
            ("print(1)\nlocal = 2\n", 2),
            ("local function f()\n\treturn 1\n", 3),
            ("if true then\n\tprint(1)\nelse\n", 4),
            ("local t = { 1, 2\nprint(t)", 2),
            ("print(\"unclosed)\n", 1),
            ("local a = 1\nlocal b = 2\nx +== 3\n", 3),
            ("local s = `open {1 + }`", 1),
            ("local x: = 1", 1),
            ("local function f<T>(x: T: T end", 1),
            ("for i = 1 do end", 1),
            ("return 1\nprint(2)", 2),
            ("local a = [[never closed\n\n", 1),
            ("x = if true then 1", 1),
        ];
        for (source, line) in cases {
            refused_at(source, *line);
        }
    }

    #[test]
    fn errors_keep_luaus_message() {
        let error = refused_at("local x = 1\nlocal = 2", 2);
        assert!(error.message.contains("Expected identifier"), "{error:?}");
        assert_eq!(error.column, None);
        assert_eq!(
            serde_json::to_value(&error).expect("json"),
            serde_json::json!({ "line": 2, "message": error.message })
        );
    }

    #[test]
    fn what_luaus_compiler_refuses_past_the_parser_is_refused_too() {
        // Studio compiles with the same limits: 200 locals in one function.
        let many: String = (0..201).map(|i| format!("local v{i} = {i}\n")).collect();
        let error = refused_at(&many, 201);
        assert!(error.message.contains("Out of local registers"), "{error:?}");
    }

    #[test]
    fn compiling_runs_nothing() {
        // A script that would loop forever or error at run time still only compiles.
        accepted("while true do end");
        accepted("error('never raised')");
    }

    #[test]
    fn a_message_without_a_line_is_kept_whole() {
        assert_eq!(
            parse_message(":12: Expected 'end'"),
            SyntaxError {
                line: 12,
                column: None,
                message: "Expected 'end'".into()
            }
        );
        assert_eq!(parse_message("12: x").line, 12);
        assert_eq!(parse_message("odd").message, "odd");
        assert_eq!(parse_message("odd").line, 1);
    }

    #[test]
    fn errors_read_as_loadstring_words_them() {
        let errors = check("local a = 1\nlocal b = = 2").expect_err("broken");
        let message = crate::luau::chunk_message("exec", &errors);
        assert!(message.starts_with("[string \"exec\"]:2: "), "{message}");
        assert_eq!(crate::luau::details(&errors)["errors"][0]["line"], 2);
    }

    #[test]
    fn the_bundled_version_is_named() {
        assert!(crate::luau::version().starts_with("0."), "{}", crate::luau::version());
    }
}
