"""Fault tests: what a user sees when a process dies, a disk fills, a file is damaged,
several processes race to create a store, or input is hostile (fuzzed)."""
