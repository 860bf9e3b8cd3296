"""The ledger kernel: append and read sessions, their inputs, forks, pins, snapshots and token caches."""
