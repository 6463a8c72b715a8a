//! `dockwarden rules`: the rule catalogue for reviewers.

use crate::policy::catalogue;

#[derive(Debug, clap::Args)]
pub struct RulesArgs {
    /// Print markdown (the content of `policy/RULES.md`) instead of text.
    #[arg(long)]
    pub markdown: bool,
}

pub fn main(a: RulesArgs) -> anyhow::Result<()> {
    print!(
        "{}",
        if a.markdown {
            catalogue::markdown()
        } else {
            catalogue::text()
        }
    );
    Ok(())
}
