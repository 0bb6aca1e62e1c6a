//! The one small table type every report renderer fills: a header, an alignment per
//! column and rows of cells, rendered as a Markdown pipe table (and as plain text for
//! the terminal, which is the same Markdown: it reads well in both). No other module
//! writes a table's delimiter row.

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
    Center,
}

/// A table being filled row by row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns: the first left-aligned (names), the rest right-aligned
    /// (figures).
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = S>) -> Self {
        let header: Vec<String> = columns.into_iter().map(Into::into).collect();
        let align = (0..header.len())
            .map(|i| if i == 0 { Align::Left } else { Align::Right })
            .collect();
        Table {
            header,
            align,
            rows: Vec::new(),
        }
    }

    /// The first `n` columns left-aligned (names), the rest right-aligned (figures).
    pub fn left(mut self, n: usize) -> Self {
        for (i, a) in self.align.iter_mut().enumerate() {
            *a = if i < n { Align::Left } else { Align::Right };
        }
        self
    }

    /// Column `i` aligned as `align`.
    pub fn align(mut self, i: usize, align: Align) -> Self {
        if let Some(a) = self.align.get_mut(i) {
            *a = align;
        }
        self
    }

    /// Adds a row; missing cells are blank, extra cells are an error in the caller, so
    /// they are kept visible rather than dropped (the table grows a blank-headed column).
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let cells: Vec<String> = cells.into_iter().map(Into::into).collect();
        while self.header.len() < cells.len() {
            self.header.push(String::new());
            self.align.push(Align::Right);
        }
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The Markdown pipe table, ending with a newline; `|` inside a cell is escaped, an
    /// empty cell is one space (`| |`).
    pub fn to_markdown(&self) -> String {
        let cell = |s: &str| s.replace('|', "\\|");
        let mut out = String::new();
        let line = |cells: Vec<String>| {
            let cells: Vec<String> = cells
                .iter()
                .map(|c| {
                    if c.is_empty() {
                        " ".into()
                    } else {
                        format!(" {c} ")
                    }
                })
                .collect();
            format!("|{}|\n", cells.join("|"))
        };
        out.push_str(&line(self.header.iter().map(|h| cell(h)).collect()));
        out.push_str(&format!(
            "|{}|\n",
            self.align
                .iter()
                .map(|a| match a {
                    Align::Left => "---",
                    Align::Right => "---:",
                    Align::Center => ":---:",
                })
                .collect::<Vec<_>>()
                .join("|")
        ));
        for r in &self.rows {
            let mut cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
            cells.resize(self.header.len(), String::new());
            out.push_str(&line(cells));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_pipe_table() {
        let mut t = Table::new(["Scenario", "CPU ms/request"]);
        assert!(t.is_empty());
        t.row(["B (local)", "1.30"]);
        t.row(["A | NFS"]);
        assert_eq!(
            t.to_markdown(),
            "| Scenario | CPU ms/request |\n|---|---:|\n| B (local) | 1.30 |\n| A \\| NFS | |\n"
        );
        t.row(["x", "1", "extra"]);
        assert!(
            t.to_markdown()
                .starts_with("| Scenario | CPU ms/request | |\n|---|---:|---:|")
        );
        let kv = Table::new(["", ""]).left(2).align(1, Align::Center);
        assert_eq!(kv.to_markdown(), "| | |\n|---|:---:|\n");
    }
}
