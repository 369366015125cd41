//! What the two human surfaces, the CLI (`src/cli/`) and the terminal (`src/terminal/`),
//! share. Two floors live here (tests/floors.rs):
//! - [`render`] and [`luau`], the rendering library, sit below the command table: each
//!   command renders its own result with them (`commands::Render`, in the command's
//!   file), and they know JSON and terminals, never a command, the bridge or an adapter.
//! - [`args`], the table's commands as clap subcommands, sits with the adapters above the
//!   table: it reads each command's spec and schema, and no command reads it.

pub mod args;
pub mod luau;
pub mod render;
