//! What a call may need and a policy may deny: the capabilities, and sets of them as one
//! byte, so that every command's spec names its set in a `const`.

use std::fmt;

/// What a call may need, and what a policy may deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Answers from Studio or the API.
    Read,
    /// Changes the place.
    Write,
    /// Runs or writes Luau.
    Code,
    /// Starts or stops playtests.
    Play,
    /// Brings content from the network.
    Assets,
    /// Starts or ends applications on the person's desktop (Studio: `open`, `run`, `close`).
    Launch,
    /// Reaches Roblox's Open Cloud with the user's API key (denied while none is configured).
    Cloud,
    /// Publishes a version that live players get (`cloud_publish` with `Published`; denied
    /// unless `allow_publish`).
    Publish,
}

impl Capability {
    /// Every capability, in the order they are named.
    pub const ALL: [Capability; 8] = [
        Capability::Read,
        Capability::Write,
        Capability::Code,
        Capability::Play,
        Capability::Assets,
        Capability::Launch,
        Capability::Cloud,
        Capability::Publish,
    ];

    /// Its name in flags, the config file and messages.
    pub const fn name(self) -> &'static str {
        match self {
            Capability::Read => "read",
            Capability::Write => "write",
            Capability::Code => "code",
            Capability::Play => "play",
            Capability::Assets => "assets",
            Capability::Launch => "launch",
            Capability::Cloud => "cloud",
            Capability::Publish => "publish",
        }
    }

    pub fn parse(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.name() == name)
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of capabilities.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities(u8);

impl Capabilities {
    pub const NONE: Capabilities = Capabilities(0);

    /// The set of `list`, for a command's spec: `Capabilities::of(&[Capability::Read])`.
    pub const fn of(list: &[Capability]) -> Capabilities {
        let mut bits = 0;
        let mut i = 0;
        while i < list.len() {
            bits |= list[i].bit();
            i += 1;
        }
        Capabilities(bits)
    }

    pub const fn with(self, capability: Capability) -> Capabilities {
        Capabilities(self.0 | capability.bit())
    }

    pub const fn union(self, other: Capabilities) -> Capabilities {
        Capabilities(self.0 | other.0)
    }

    pub const fn contains(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    pub const fn contains_all(self, other: Capabilities) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The members, in [`Capability::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL.into_iter().filter(move |c| self.contains(*c))
    }

    /// The members' names, in order.
    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(Capability::name).collect()
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(Capability::name)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Capability::*;
    use super::*;

    #[test]
    fn capability_sets_hold_what_they_are_given() {
        let set = Capabilities::of(&[Code, Read]);
        assert!(set.contains(Read) && set.contains(Code) && !set.contains(Write));
        assert_eq!(set.names(), ["read", "code"], "in the order of Capability::ALL");
        assert!(set.with(Play).contains_all(set));
        assert!(!set.contains_all(Capabilities::of(&[Play])));
        assert!(Capabilities::NONE.is_empty());
        for capability in Capability::ALL {
            assert_eq!(Capability::parse(capability.name()), Some(capability));
        }
        assert_eq!(Capability::parse("exec"), None);
    }
}
