"""The pure core of contextledger: events, rules and errors; no I/O."""
