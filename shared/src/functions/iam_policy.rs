//! The code's partitions ([`super::PARTITIONS`]) against the roles of `infra/iam.tf`: each
//! function's `dynamodb:LeadingKeys` must be exactly the partitions its code reaches. DynamoDB
//! enforces the condition and the emulator does not, so a prefix the code starts to use (a new
//! rate limit, a new item kind) would pass every test here and fail on AWS with AccessDenied,
//! or, where the code treats a store failure as "allowed", silently switch a protection off.
//!
//! `infra/iam.tf` is read with a small HCL reader ([`hcl`]): blocks, attributes, strings,
//! lists and objects, comments and heredocs; any other expression is kept as its text.

use std::collections::{BTreeMap, BTreeSet};

use super::{ACCOUNT_PUT_PARTITIONS, INDEX_PARTITIONS, PARTITIONS};

mod hcl {
    //! Just enough HCL for Terraform policy documents.

    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        Str(String),
        List(Vec<Value>),
        Object(Vec<(String, Value)>),
        /// Any other expression, as its tokens joined.
        Expr(String),
    }

    #[derive(Debug, Default)]
    pub struct Body {
        pub attributes: Vec<(String, Value)>,
        pub blocks: Vec<Block>,
    }

    #[derive(Debug)]
    pub struct Block {
        pub kind: String,
        pub labels: Vec<String>,
        pub body: Body,
    }

    impl Body {
        pub fn attribute(&self, name: &str) -> Option<&Value> {
            self.attributes
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v)
        }

        pub fn blocks<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Block> {
            self.blocks.iter().filter(move |b| b.kind == kind)
        }
    }

    impl Value {
        pub fn strings(&self) -> Vec<String> {
            match self {
                Value::Str(s) => vec![s.clone()],
                Value::List(items) => items.iter().flat_map(Value::strings).collect(),
                _ => Vec::new(),
            }
        }
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Token {
        Word(String),
        Str(String),
        Punct(char),
        Newline,
    }

    fn tokens(text: &str) -> Result<Vec<Token>, String> {
        let chars: Vec<char> = text.chars().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            match c {
                '\n' => {
                    out.push(Token::Newline);
                    i += 1;
                }
                c if c.is_whitespace() => i += 1,
                '#' => {
                    while i < chars.len() && chars[i] != '\n' {
                        i += 1;
                    }
                }
                '/' if next == Some('/') => {
                    while i < chars.len() && chars[i] != '\n' {
                        i += 1;
                    }
                }
                '/' if next == Some('*') => {
                    i += 2;
                    while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                        i += 1;
                    }
                    i += 2;
                }
                '<' if next == Some('<') => {
                    // A heredoc: <<ID or <<-ID, up to a line that is ID.
                    i += 2;
                    if chars.get(i) == Some(&'-') {
                        i += 1;
                    }
                    let start = i;
                    while i < chars.len() && chars[i] != '\n' {
                        i += 1;
                    }
                    let id: String = chars[start..i].iter().collect::<String>().trim().into();
                    let mut body = String::new();
                    loop {
                        i += 1;
                        let line_start = i;
                        while i < chars.len() && chars[i] != '\n' {
                            i += 1;
                        }
                        let line: String = chars[line_start.min(chars.len())..i].iter().collect();
                        if line.trim() == id || i >= chars.len() {
                            break;
                        }
                        body.push_str(&line);
                        body.push('\n');
                    }
                    out.push(Token::Str(body));
                }
                '"' => {
                    let (s, end) = string(&chars, i + 1)?;
                    out.push(Token::Str(s));
                    i = end;
                }
                c if c.is_alphanumeric() || "_-.*:".contains(c) => {
                    let start = i;
                    while i < chars.len()
                        && (chars[i].is_alphanumeric() || "_-.*:".contains(chars[i]))
                    {
                        i += 1;
                    }
                    out.push(Token::Word(chars[start..i].iter().collect()));
                }
                c => {
                    out.push(Token::Punct(c));
                    i += 1;
                }
            }
        }
        Ok(out)
    }

    /// A string from just after its opening quote: its text (escapes resolved, interpolations
    /// kept, quotes inside them too) and the index after its closing quote.
    fn string(chars: &[char], mut i: usize) -> Result<(String, usize), String> {
        let mut s = String::new();
        let mut depth = 0usize;
        while i < chars.len() {
            let c = chars[i];
            match c {
                '\\' if i + 1 < chars.len() => {
                    match chars[i + 1] {
                        'n' => s.push('\n'),
                        't' => s.push('\t'),
                        other => s.push(other),
                    }
                    i += 2;
                    continue;
                }
                '$' if chars.get(i + 1) == Some(&'{') => {
                    depth += 1;
                    s.push_str("${");
                    i += 2;
                    continue;
                }
                '{' if depth > 0 => depth += 1,
                '}' if depth > 0 => depth -= 1,
                '"' if depth > 0 => {
                    let (inner, end) = string(chars, i + 1)?;
                    s.push('"');
                    s.push_str(&inner);
                    s.push('"');
                    i = end;
                    continue;
                }
                '"' => return Ok((s, i + 1)),
                _ => {}
            }
            s.push(c);
            i += 1;
        }
        Err("unterminated string".into())
    }

    struct Parser {
        tokens: Vec<Token>,
        at: usize,
    }

    impl Parser {
        fn peek(&self) -> Option<&Token> {
            self.tokens.get(self.at)
        }

        fn next(&mut self) -> Option<Token> {
            let t = self.tokens.get(self.at).cloned();
            self.at += 1;
            t
        }

        fn skip_newlines(&mut self) {
            while self.peek() == Some(&Token::Newline) {
                self.at += 1;
            }
        }

        /// Attributes and blocks up to a closing brace (`nested`) or the end.
        fn body(&mut self, nested: bool) -> Result<Body, String> {
            let mut body = Body::default();
            loop {
                self.skip_newlines();
                match self.next() {
                    None if !nested => return Ok(body),
                    Some(Token::Punct('}')) if nested => return Ok(body),
                    Some(Token::Word(name)) => {
                        if self.peek() == Some(&Token::Punct('=')) {
                            self.at += 1;
                            let value = self.value(false)?;
                            body.attributes.push((name, value));
                            continue;
                        }
                        let mut labels = Vec::new();
                        loop {
                            match self.next() {
                                Some(Token::Str(l)) | Some(Token::Word(l)) => labels.push(l),
                                Some(Token::Punct('{')) => break,
                                other => return Err(format!("bad block header: {other:?}")),
                            }
                        }
                        let inner = self.body(true)?;
                        body.blocks.push(Block {
                            kind: name,
                            labels,
                            body: inner,
                        });
                    }
                    other => return Err(format!("unexpected {other:?}")),
                }
            }
        }

        /// One expression; `nested` inside a list or object (where `,` `]` `}` end it too).
        fn value(&mut self, nested: bool) -> Result<Value, String> {
            self.skip_newlines();
            match self.peek() {
                Some(Token::Punct('[')) => {
                    self.at += 1;
                    let mut items = Vec::new();
                    loop {
                        self.skip_newlines();
                        if self.peek() == Some(&Token::Punct(']')) {
                            self.at += 1;
                            return Ok(Value::List(items));
                        }
                        items.push(self.value(true)?);
                        self.skip_newlines();
                        if self.peek() == Some(&Token::Punct(',')) {
                            self.at += 1;
                        }
                    }
                }
                Some(Token::Punct('{')) => {
                    self.at += 1;
                    let mut entries = Vec::new();
                    loop {
                        self.skip_newlines();
                        match self.next() {
                            Some(Token::Punct('}')) => return Ok(Value::Object(entries)),
                            Some(Token::Word(k)) | Some(Token::Str(k)) => {
                                match self.next() {
                                    Some(Token::Punct('=')) => {}
                                    other => return Err(format!("bad object entry: {other:?}")),
                                }
                                entries.push((k, self.value(true)?));
                                if self.peek() == Some(&Token::Punct(',')) {
                                    self.at += 1;
                                }
                            }
                            other => return Err(format!("bad object key: {other:?}")),
                        }
                    }
                }
                _ => {
                    let mut parts: Vec<Token> = Vec::new();
                    let mut depth = 0usize;
                    while let Some(t) = self.peek() {
                        match t {
                            Token::Newline if depth == 0 => break,
                            Token::Punct(',' | ']' | '}') if depth == 0 && nested => break,
                            Token::Punct('}') if depth == 0 => break,
                            Token::Punct('(' | '[' | '{') => depth += 1,
                            Token::Punct(')' | ']' | '}') => depth = depth.saturating_sub(1),
                            _ => {}
                        }
                        parts.push(t.clone());
                        self.at += 1;
                    }
                    match parts.as_slice() {
                        [Token::Str(s)] => Ok(Value::Str(s.clone())),
                        _ => Ok(Value::Expr(
                            parts
                                .iter()
                                .map(|t| match t {
                                    Token::Word(w) => w.clone(),
                                    Token::Str(s) => format!("{s:?}"),
                                    Token::Punct(c) => c.to_string(),
                                    Token::Newline => "\n".into(),
                                })
                                .collect(),
                        )),
                    }
                }
            }
        }
    }

    pub fn parse(text: &str) -> Result<Body, String> {
        let mut parser = Parser {
            tokens: tokens(text)?,
            at: 0,
        };
        parser.body(false)
    }
}

/// Each function's `dynamodb:LeadingKeys` values over all its DynamoDB statements, from
/// `local.function_policies` (function -> policy document) and the documents: the table's
/// statements (their keys and actions), then those on the index alone (`local.index_arns`).
type RoleKeys = (Vec<(BTreeSet<String>, Vec<String>)>, Vec<BTreeSet<String>>);

fn leading_keys(iam: &hcl::Body) -> BTreeMap<String, RoleKeys> {
    let policies = iam
        .blocks("locals")
        .find_map(|b| b.body.attribute("function_policies"))
        .expect("iam.tf has local.function_policies");
    let hcl::Value::Object(entries) = policies else {
        panic!("function_policies is not an object: {policies:?}");
    };
    let documents: BTreeMap<&str, &hcl::Body> = iam
        .blocks("data")
        .filter(|b| b.labels.first().map(String::as_str) == Some("aws_iam_policy_document"))
        .map(|b| (b.labels[1].as_str(), &b.body))
        .collect();
    let mut out = BTreeMap::new();
    for (function, reference) in entries {
        let hcl::Value::Expr(reference) = reference else {
            panic!("{function}'s policy is not a reference: {reference:?}");
        };
        let name = reference
            .strip_prefix("data.aws_iam_policy_document.")
            .and_then(|r| r.strip_suffix(".json"))
            .unwrap_or_else(|| panic!("{function}'s policy is not a policy document: {reference}"));
        let document = documents
            .get(name)
            .unwrap_or_else(|| panic!("no policy document {name}"));
        let mut statements = Vec::new();
        let mut on_index = Vec::new();
        for statement in document.blocks("statement") {
            let actions = statement
                .body
                .attribute("actions")
                .map(hcl::Value::strings)
                .unwrap_or_default();
            if !actions.iter().any(|a| a.starts_with("dynamodb:")) {
                continue;
            }
            let keys = statement
                .body
                .blocks("condition")
                .find(|c| {
                    c.body.attribute("variable")
                        == Some(&hcl::Value::Str("dynamodb:LeadingKeys".into()))
                })
                .and_then(|c| c.body.attribute("values"))
                .map(hcl::Value::strings)
                .unwrap_or_default();
            let index_only = statement.body.attribute("resources")
                == Some(&hcl::Value::Expr("local.index_arns".into()));
            if index_only {
                on_index.push(keys.into_iter().collect());
            } else {
                statements.push((keys.into_iter().collect(), actions));
            }
        }
        out.insert(function.clone(), (statements, on_index));
    }
    out
}

fn iam_tf() -> hcl::Body {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/iam.tf");
    let text = std::fs::read_to_string(path).expect("infra/iam.tf");
    hcl::parse(&text).expect("infra/iam.tf parses")
}

/// Every DynamoDB statement of each role allows exactly the partitions its function's code
/// reaches: no prefix missing (AccessDenied on AWS, as the oauth limiter's `RL#` counters were),
/// none to spare. The one exception is narrower, never wider: the account function's PutItem,
/// in a statement of its own, reaches only where a deletion writes ([`ACCOUNT_PUT_PARTITIONS`];
/// issue 48 item 9: it used to share the delete statement, and so could put tokens, grants,
/// refresh tokens, sessions and clients).
#[test]
fn every_role_reaches_exactly_its_partitions() {
    let roles = leading_keys(&iam_tf());
    let functions: BTreeSet<&str> = PARTITIONS.iter().map(|(f, _)| *f).collect();
    assert_eq!(
        roles.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        functions,
        "iam.tf's roles and the code's functions"
    );
    let account_puts: BTreeSet<String> = ACCOUNT_PUT_PARTITIONS
        .iter()
        .map(|p| p.leading_key())
        .collect();
    for (function, partitions) in PARTITIONS {
        let code: BTreeSet<String> = partitions.iter().map(|p| p.leading_key()).collect();
        let (statements, on_index) = &roles[function];
        let index_code: BTreeSet<String> = INDEX_PARTITIONS
            .iter()
            .filter(|(f, _)| *f == function)
            .flat_map(|(_, keys)| keys.iter().map(|k| (*k).to_owned()))
            .collect();
        let index_role: BTreeSet<String> = on_index.iter().flatten().cloned().collect();
        assert_eq!(
            index_role, index_code,
            "{function}'s index-only statements and the index partitions its code queries"
        );
        assert!(
            !statements.is_empty(),
            "{function} has no DynamoDB statement"
        );
        for (keys, actions) in statements {
            let puts = actions.iter().any(|a| a == "dynamodb:PutItem");
            let expected = if function == "account" && puts {
                assert_eq!(
                    actions,
                    &["dynamodb:PutItem".to_owned()],
                    "account's PutItem shares a statement with other actions"
                );
                &account_puts
            } else {
                &code
            };
            let missing: Vec<_> = expected.difference(keys).collect();
            assert!(
                missing.is_empty(),
                "{function}'s role does not allow {missing:?}, which its code uses"
            );
            let extra: Vec<_> = keys.difference(expected).collect();
            assert!(
                extra.is_empty(),
                "{function}'s role allows {extra:?}, which its code does not use ({actions:?})"
            );
        }
        if function == "account" {
            assert!(
                statements
                    .iter()
                    .any(|(_, a)| a.iter().any(|a| a == "dynamodb:PutItem")),
                "account puts its marker and tombstones"
            );
        }
    }
}

/// The reader sees what python-hcl2 sees in tests/infra (so the test above cannot pass on a
/// misread file): oauth's statement, a heredoc, comments and interpolations.
#[test]
fn the_hcl_reader_reads_policy_documents() {
    let text = r#"
# a comment
locals {
  function_policies = {
    a = data.aws_iam_policy_document.a.json // another
  }
  arns = ["${aws_dynamodb_table.main.arn}/index/gsi1", "${x["y"]}"]
}
/* a block
   comment */
data "aws_iam_policy_document" "a" {
  statement {
    sid     = "Items"
    actions = [
      "dynamodb:GetItem",
      "dynamodb:PutItem",
    ]
    resources = local.arns
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = ["A#*", "B#one"]
    }
  }
  statement {
    actions = ["kms:Sign"]
    resources = [aws_kms_key.signing.arn]
  }
}
resource "x" "y" {
  text = <<-EOT
    not { a block
  EOT
  n = 5
}
"#;
    let body = hcl::parse(text).unwrap();
    let keys = leading_keys(&body);
    assert_eq!(
        keys["a"].0,
        vec![(
            BTreeSet::from(["A#*".to_owned(), "B#one".to_owned()]),
            vec!["dynamodb:GetItem".to_owned(), "dynamodb:PutItem".to_owned()]
        )]
    );
    let locals = body.blocks("locals").next().unwrap();
    assert_eq!(
        locals.body.attribute("arns").unwrap().strings(),
        vec![
            "${aws_dynamodb_table.main.arn}/index/gsi1".to_owned(),
            "${x[\"y\"]}".to_owned()
        ]
    );
    let resource = body.blocks("resource").next().unwrap();
    assert_eq!(
        resource.body.attribute("text"),
        Some(&hcl::Value::Str("    not { a block\n".into()))
    );
    assert_eq!(
        resource.body.attribute("n"),
        Some(&hcl::Value::Expr("5".into()))
    );
    // And the real file: oauth's one DynamoDB statement on the table, one on the index.
    let real = leading_keys(&iam_tf());
    assert_eq!(real["oauth"].0.len(), 1);
    assert!(real["oauth"].0[0].0.contains("SECRET#oauth"));
    assert_eq!(
        real["oauth"].1,
        vec![BTreeSet::from(["U#*#SESSIONS".to_owned()])]
    );
}
