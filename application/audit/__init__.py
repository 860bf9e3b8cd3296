"""The audit: model-call records, the calls view, forensics (why) and session replay."""
