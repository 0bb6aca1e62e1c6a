//! A report as data: a list of blocks (headings, paragraphs, bullet lists, tables),
//! rendered to Markdown one way for every report. A report is a list of sections, each
//! a small function from its model to blocks ([`Section`]); adding a section is adding
//! one function to that list.

use crate::table::Table;

/// One block of a report.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// `#`×level and the text.
    Heading(usize, String),
    /// A paragraph (it may hold line breaks of its own).
    Text(String),
    /// A bullet list, one item a line; an empty list is left out.
    List(Vec<String>),
    Table(Table),
}

/// A section of a report over the model `M`: the blocks it contributes (none when the
/// model has nothing for it).
pub type Section<M> = fn(&M) -> Vec<Block>;

/// Blocks in order: built by sections, rendered as Markdown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Doc {
    blocks: Vec<Block>,
}

impl Doc {
    /// The document of `model` made by `sections`, in order.
    pub fn of<M>(model: &M, sections: &[Section<M>]) -> Doc {
        Doc {
            blocks: sections.iter().flat_map(|s| s(model)).collect(),
        }
    }

    /// Markdown: the blocks separated by one blank line, ending with a newline; an empty
    /// list or table is left out.
    pub fn to_markdown(&self) -> String {
        let rendered: Vec<String> = self.blocks.iter().filter_map(Block::to_markdown).collect();
        rendered.join("\n")
    }
}

impl FromIterator<Block> for Doc {
    fn from_iter<I: IntoIterator<Item = Block>>(iter: I) -> Self {
        Doc {
            blocks: iter.into_iter().collect(),
        }
    }
}

impl Block {
    /// `## text`.
    pub fn h2(text: impl Into<String>) -> Block {
        Block::Heading(2, text.into())
    }

    /// `### text`.
    pub fn h3(text: impl Into<String>) -> Block {
        Block::Heading(3, text.into())
    }

    pub fn text(text: impl Into<String>) -> Block {
        Block::Text(text.into())
    }

    /// The block's Markdown ending with a newline; `None` for an empty list or table.
    fn to_markdown(&self) -> Option<String> {
        match self {
            Block::Heading(level, text) => Some(format!("{} {text}\n", "#".repeat(*level))),
            Block::Text(text) => Some(format!("{text}\n")),
            Block::List(items) if items.is_empty() => None,
            Block::List(items) => Some(items.iter().map(|i| format!("- {i}\n")).collect()),
            Block::Table(t) if t.is_empty() => None,
            Block::Table(t) => Some(t.to_markdown()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_separated_by_one_blank_line() {
        let mut t = Table::new(["a", "b"]);
        t.row(["x", "1"]);
        let doc: Doc = [
            Block::Heading(1, "Title".into()),
            Block::h2("Part"),
            Block::text("Some words."),
            Block::List(vec![]),
            Block::List(vec!["one".into(), "two".into()]),
            Block::Table(t),
            Block::Table(Table::new(["empty"])),
            Block::text("The end."),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            doc.to_markdown(),
            "# Title\n\n## Part\n\nSome words.\n\n- one\n- two\n\n| a | b |\n|---|---:|\n| x | 1 |\n\nThe end.\n"
        );
    }

    #[test]
    fn sections_run_in_order() {
        fn one(n: &u32) -> Vec<Block> {
            vec![Block::text(format!("n = {n}"))]
        }
        fn none(_: &u32) -> Vec<Block> {
            Vec::new()
        }
        let sections: [Section<u32>; 3] = [one, none, one];
        assert_eq!(Doc::of(&7, &sections).to_markdown(), "n = 7\n\nn = 7\n");
    }
}
