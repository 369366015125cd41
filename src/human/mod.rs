//! What the two human surfaces, the CLI (`src/cli/`) and the terminal (`src/terminal/`),
//! share: the table's commands as clap subcommands, and rendering results for a person.
//! It knows the command table and JSON, never the bridge.

pub mod args;
pub mod luau;
pub mod render;
