//! A small shell lexer: logical lines, words with quotes removed, command separators,
//! command substitutions and here-document delimiters. It only has to find commands, not run
//! them, so expansions stay literal.

/// A line after joining backslash-newline continuations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// 1-based number of its first physical line.
    pub number: usize,
    pub text: String,
}

/// Joins continuation lines.
pub fn logical_lines(text: &str) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    let mut open: Option<Line> = None;
    for (i, raw) in text.split('\n').enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let mut cur = open.take().unwrap_or(Line {
            number: i + 1,
            text: String::new(),
        });
        let slashes = raw.chars().rev().take_while(|c| *c == '\\').count();
        if slashes % 2 == 1 {
            cur.text.push_str(&raw[..raw.len() - 1]);
            open = Some(cur);
        } else {
            cur.text.push_str(raw);
            out.push(cur);
        }
    }
    out.extend(open);
    out
}

/// What one logical line holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Simple commands, each as its words.
    pub commands: Vec<Vec<String>>,
    /// The text of `$(...)` and backquote substitutions inside double quotes, to scan on their own.
    pub substitutions: Vec<String>,
    /// Here-document delimiters opened on this line, and whether `<<-` strips tabs.
    pub heredocs: Vec<(String, bool)>,
}

enum Redirect {
    /// The next word is a redirection target, not an argument.
    Target,
    /// The next word is a here-document delimiter.
    Heredoc(bool),
}

#[derive(Default)]
struct Lexer {
    t: Tokens,
    cmd: Vec<String>,
    word: String,
    in_word: bool,
    redirect: Option<Redirect>,
}

impl Lexer {
    fn flush(&mut self) {
        if !self.in_word {
            return;
        }
        let w = std::mem::take(&mut self.word);
        self.in_word = false;
        match self.redirect.take() {
            Some(Redirect::Target) => {}
            Some(Redirect::Heredoc(strip)) => self.t.heredocs.push((w, strip)),
            None => self.cmd.push(w),
        }
    }

    fn end_command(&mut self) {
        self.flush();
        if !self.cmd.is_empty() {
            self.t.commands.push(std::mem::take(&mut self.cmd));
        }
    }
}

/// The text up to the `)` closing a `(` just before `from`, and the index after it.
fn balanced(c: &[char], from: usize) -> (String, usize) {
    let mut depth = 1;
    let mut i = from;
    while i < c.len() {
        match c[i] {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return (c[from..i].iter().collect(), i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    (c[from..].iter().collect(), c.len())
}

/// Splits one logical line into commands.
pub fn tokenize(line: &str) -> Tokens {
    let c: Vec<char> = line.chars().collect();
    let n = c.len();
    let at = |i: usize| c.get(i).copied();
    let mut lx = Lexer::default();
    let mut i = 0;
    while i < n {
        let ch = c[i];
        match ch {
            ' ' | '\t' | '\r' | '\n' => {
                lx.flush();
                i += 1;
            }
            // A comment starts only at the beginning of a word.
            '#' if !lx.in_word => break,
            '\'' => {
                lx.in_word = true;
                i += 1;
                while i < n && c[i] != '\'' {
                    lx.word.push(c[i]);
                    i += 1;
                }
                i += 1;
            }
            '"' => {
                lx.in_word = true;
                i = double_quoted(&c, i + 1, &mut lx);
            }
            '\\' => {
                lx.word.extend(at(i + 1));
                lx.in_word = true;
                i += 2;
            }
            ';' | '&' | '|' | '(' | ')' | '`' => {
                lx.end_command();
                i += 1;
            }
            '$' if at(i + 1) == Some('(') && at(i + 2) == Some('(') => {
                // Arithmetic: no command inside.
                let (_, end) = balanced(&c, i + 2);
                lx.word.push_str("$((...))");
                lx.in_word = true;
                i = end;
            }
            '$' if at(i + 1) == Some('(') => {
                lx.end_command();
                i += 2;
            }
            '<' | '>' => i = redirection(&c, i, &mut lx),
            _ => {
                lx.word.push(ch);
                lx.in_word = true;
                i += 1;
            }
        }
    }
    lx.end_command();
    lx.t
}

/// Reads a double-quoted string starting after its quote; returns the index after its end.
fn double_quoted(c: &[char], mut i: usize, lx: &mut Lexer) -> usize {
    let n = c.len();
    while i < n && c[i] != '"' {
        match c[i] {
            '\\' if i + 1 < n && matches!(c[i + 1], '$' | '`' | '"' | '\\') => {
                lx.word.push(c[i + 1]);
                i += 2;
            }
            '$' if i + 1 < n && c[i + 1] == '(' => {
                let (inner, end) = balanced(c, i + 2);
                lx.t.substitutions.push(inner);
                lx.word.push_str("$(...)");
                i = end;
            }
            '`' => {
                let end = (i + 1..n).find(|j| c[*j] == '`').unwrap_or(n);
                lx.t.substitutions.push(c[i + 1..end].iter().collect());
                lx.word.push_str("`...`");
                i = end + 1;
            }
            ch => {
                lx.word.push(ch);
                i += 1;
            }
        }
    }
    i + 1
}

/// Handles `<`, `>`, `2>&1`, `<<EOF`, `<<-EOF`, `<<<word`; returns the index after the operator.
fn redirection(c: &[char], mut i: usize, lx: &mut Lexer) -> usize {
    // `2>`: the digits were a descriptor number, not an argument.
    if lx.in_word && !lx.word.is_empty() && lx.word.chars().all(|d| d.is_ascii_digit()) {
        lx.word.clear();
        lx.in_word = false;
    }
    lx.flush();
    let at = |j: usize| c.get(j).copied();
    if c[i] == '<' && at(i + 1) == Some('<') {
        if at(i + 2) == Some('<') {
            lx.redirect = Some(Redirect::Target);
            return i + 3;
        }
        let strip = at(i + 2) == Some('-');
        lx.redirect = Some(Redirect::Heredoc(strip));
        return i + 2 + usize::from(strip);
    }
    let mut dup = false;
    i += 1;
    while let Some(ch @ ('>' | '<' | '&' | '|')) = at(i) {
        dup |= ch == '&';
        i += 1;
    }
    if dup && at(i).is_some_and(|d| d.is_ascii_digit() || d == '-') {
        while at(i).is_some_and(|d| d.is_ascii_digit() || d == '-') {
            i += 1;
        }
    } else {
        lx.redirect = Some(Redirect::Target);
    }
    i
}
