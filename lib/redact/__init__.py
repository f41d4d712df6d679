"""The redact stage family: PII detection and replacement (pii/) and what each output may hold (privacy)."""
