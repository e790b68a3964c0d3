"""The replay's commands, one module per subcommand (`replay.cli` registers their parsers and
turns the replay's errors into the command line's): timeline, state and diff, who-owned, verify,
dump; `reading` is what they share: the records the arguments name, and how what was read is said."""
