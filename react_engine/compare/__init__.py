"""The side-by-side protocol comparison (``react-engine compare``)."""
