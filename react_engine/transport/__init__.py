"""The transport: what goes over the wire to a model, and what its server accepts
(docs/architecture.md lists the modules). Nothing is imported here."""
