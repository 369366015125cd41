//! The rendering library the two human surfaces, the CLI (`src/cli/`) and the terminal
//! (`src/terminal/`), write with. It sits below the command table (tests/floors.rs): each
//! command renders its own result with it (`commands::Render`, in the command's file), and
//! it knows JSON and terminals, never a command, the bridge or an adapter. The commands as
//! clap subcommands, which those surfaces also share, are the `subcommands` module, on
//! the adapters' floor.

pub mod luau;
pub mod render;
