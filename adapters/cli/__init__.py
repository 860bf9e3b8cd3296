"""The ``contextledger`` command line."""
