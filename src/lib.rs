//! studio-bridge: lets AI coding agents see and drive running Roblox Studio sessions.
//!
//! `studio-bridge mcp` speaks MCP on stdio and hosts the loopback WebSocket bridge that
//! the Studio plugin connects to; every other subcommand is one command of the table.
//! See `docs/protocol.md` for the wire contract.

pub mod bridge;
pub mod capture;
pub mod cli;
pub mod cloud;
pub mod commands;
pub mod config;
pub mod human;
pub mod image;
pub mod launch;
pub mod luau;
pub mod mcp;
pub mod plugin_install;
pub mod policy;
pub mod protocol;
pub mod sourcemap;
pub mod subcommands;
pub mod terminal;
